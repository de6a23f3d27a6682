"""Fault: one node of the 3-node cluster cut off from the clients and from the other nodes
(``LocalKafkaCluster.isolate_broker``: a partition, the node keeps running) under traffic
(replication factor 3, min ISR 2, acks=all, both client families end to end): nothing
acknowledged is lost, no key goes out of order, no send fails, and every partition flows
again once the node is back (``first_record_s`` below ``restored_at_s``: it flowed while the
node was still away).

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

Reduced size: the leader of level 2's partition 0 dropped for 8 s; ``--faults-full``: the
same for 30 s, then another node rejected (connections reset, refused) for 30 s."""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults.common import LEVELS, Tally, run_under_load
from tests.faults.failover import Failover, replicated_topic

pytestmark = [pytest.mark.faults, pytest.mark.integration]


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_node_cut_off_loses_nothing(
    kafka_cluster: Any, faults_full: bool, fault_report: Any, client: str, unique_name: Any
) -> None:
    """0 acknowledged records lost, 0 order violations, 0 send failures; every partition
    handles a record sent after the cut within 30 s of the heal."""
    name = replicated_topic(kafka_cluster, unique_name("cutoff"))
    cuts = [("drop", 30.0), ("reject", 30.0)] if faults_full else [("drop", 8.0)]

    def cut(tally: Tally) -> dict[str, Any]:
        failover = Failover(kafka_cluster, name, tally, steady_s=10 if faults_full else 3)
        for how, hold_s in cuts:
            leader = failover.leaders()[(LEVELS - 1, 0)]
            node = leader if not failover.faults else next(
                n for n in kafka_cluster.broker_ids if n != failover.faults[-1]["broker"])
            assert node is not None
            failover.fault(f"node {node} cut off ({how}) for {hold_s:g} s", node,
                           lambda n=node, h=how: kafka_cluster.isolate_broker(n, h),
                           lambda n=node: kafka_cluster.heal_broker(n), hold_s=hold_s,
                           flows_during=False)
        return {"cut": [how for how, _ in cuts], **failover.figures()}

    figures = run_under_load(kafka_cluster.bootstrap_servers, name, cut, client=client,
                             producer_client=client, producer_configs={"acks": "all"})
    fault_report(f"one node cut off ({client})", **figures)
    assert figures["lost"] == 0 and figures["order_violations"] == 0, figures
    assert figures["send_failures"] == 0, figures
    assert all(t < f["restored_at_s"] + 30 for f in figures["faults"]
               for t in f["first_record_s"].values()), figures
