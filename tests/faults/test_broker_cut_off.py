"""Fault: one node of the 3-node cluster cut off from the clients and from the other nodes
(``LocalKafkaCluster.isolate_broker``: a partition, the node keeps running) under traffic
(replication factor 3, min ISR 2, producers acks=all with idempotence), both client families
at once, each end to end on a topic of its own: nothing acknowledged is lost, no key goes out
of order, no send fails, and every partition flows again once the node is back
(``first_record_s`` below ``restored_at_s``: it flowed while the node was still away).

How the cut works: every listener of every node (the controllers' too) sits behind a loopback
proxy, which the node advertises and the quorum's voters name, so clients and nodes reach a
node only through its proxies. Cutting node N cuts the links to N's proxies and the links from
N's process to the other nodes' proxies (told apart by the process holding each connection's
local port), so N can neither be reached nor reach out: its heartbeats to the controllers stop
and it is fenced, its leaderships go, and followers stop fetching from it. ``"drop"`` (the
default here) holds every byte and connection, as a partition that drops packets does:
requests to N hang until the client's own timeout (kafka-python's ``request_timeout_ms``
30 s, librdkafka's ``socket.timeout.ms`` 60 s), however soon another node took over. Once
healed, held connections carry on, N catches up and rejoins the in-sync replicas.

Which node matters: the active controller fences the others, so cutting it off first costs a
quorum election (the two others notice after ``controller.quorum.fetch.timeout.ms``, 2 s) and
the new controller fences it a session timeout after taking over. Reduced size: the leader of
level 2's partition 0 of the kafka-python topic (or, if it is the active controller, another
node) dropped for 8 s; ``--faults-full``: 30 s each, a node that is not the controller and then
the controller, dropped, then the same two rejected (connections reset, refused)"""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks._traffic import LEVELS
from tests.faults.failover import Failover, run_failover

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def test_a_node_cut_off_loses_nothing(
    kafka_cluster: Any, faults_full: bool, fault_report: Any, unique_name: Any
) -> None:
    """0 acknowledged records lost, 0 order violations, 0 send failures on either family;
    every partition handles a record sent after the cut within 30 s of the heal."""
    cuts = [(how, role, 30.0) for how in ("drop", "reject") for role in ("other", "controller")]
    if not faults_full:
        cuts = [("drop", "other", 8.0)]

    def node_to_cut(failover: Failover, role: str) -> int:
        controller = kafka_cluster.active_controller()
        if role == "controller":
            assert controller is not None
            return int(controller)
        leader = failover.leaders()[(LEVELS - 1, 0)]
        return leader if leader not in (None, controller) else next(
            n for n in kafka_cluster.broker_ids if n != controller)

    def cut(failover: Failover) -> dict[str, Any]:
        for how, role, hold_s in cuts:
            node = node_to_cut(failover, role)
            failover.fault(f"node {node} ({role}) cut off ({how}) for {hold_s:g} s", node,
                           lambda n=node, h=how: kafka_cluster.isolate_broker(n, h),
                           lambda n=node: kafka_cluster.heal_broker(n), hold_s=hold_s,
                           flows_during=False)
        return {"cut": [f"{how} {role}" for how, role, _ in cuts]}

    figures = run_failover(kafka_cluster, unique_name("cutoff"), "one node cut off",
                           fault_report, cut, faults_full)
    assert all(t < f["restored_at_s"] + 30 for family in figures.values()
               for f in family["faults"] for t in f["first_record_s"].values()), figures
