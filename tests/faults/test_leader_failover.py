"""Fault: SIGKILL of partition leaders under traffic on the 3-node cluster (replication factor 3,
min ISR 2, producers acks=all with idempotence), both client families at once, each end to end
on a topic of its own: nothing acknowledged is lost, no key goes out of order, no send fails,
and every partition flows again soon after each kill.

Reduced size: kill leaders until every level of the kafka-python topic has lost the leader of
one of its partitions (one or two kills: a node leads two of each topic's six partitions);
``--faults-full``: 10 rounds of killing the leader of partition 0 of level 0, 1, 2 in turn (30
kills), then the active controller once. Each killed node is started again and the cluster
back in sync before the next.

Killing the node whose controller leads the quorum costs a quorum election before the others
can fence it, and kafka-python's clients were seen to wait out their 30 s request timeout for
that node's partitions then (31 s, against 8-10 s on confluent): such a kill has 60 s."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from benchmarks._traffic import LEVELS
from tests.faults.failover import Failover, run_failover

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _victim(failover: Failover, full: bool, level: int) -> int:
    """The node to kill next: the leader of ``level``'s partition 0 (full size), or the node
    leading partitions of the most levels not yet hit (reduced)."""
    leaders = failover.leaders()
    if full:
        leader = leaders[(level, 0)]
        assert leader is not None
        return leader
    hit = {int(where.split("-")[0]) for f in failover.faults for where in f["led"]}
    levels_led: dict[int, set[int]] = {}
    for (lv, _), leader in leaders.items():
        if leader is not None and lv not in hit:
            levels_led.setdefault(leader, set()).add(lv)
    return max(levels_led, key=lambda node: len(levels_led[node]))


def test_sigkill_of_leaders_loses_nothing(
    kafka_cluster: Any, faults_full: bool, fault_report: Any, unique_name: Any
) -> None:
    """0 acknowledged records lost, 0 order violations, no send failure on either family, and
    every partition (those whose leader died and the others) handles a record sent after
    each kill within 30 s (60 s after a kill of the active controller)."""
    rounds = [level for _ in range(10) for level in range(LEVELS)] if faults_full else []

    def levels_hit(failover: Failover) -> int:
        return len({where.split("-")[0] for f in failover.faults for where in f["led"]})

    def kills(failover: Failover) -> None:
        while (len(failover.faults) < len(rounds)) if rounds else levels_hit(failover) < LEVELS:
            level = rounds[len(failover.faults)] if rounds else 0
            node = _victim(failover, faults_full, level)
            failover.fault(f"SIGKILL of node {node}", node,
                           lambda n=node: kafka_cluster.stop_broker(n, signal.SIGKILL),
                           lambda n=node: kafka_cluster.start_broker(n))
        if faults_full:
            node = kafka_cluster.active_controller()
            assert node is not None
            failover.fault(f"SIGKILL of node {node} (the active controller)", node,
                           lambda: kafka_cluster.stop_broker(node, signal.SIGKILL),
                           lambda: kafka_cluster.start_broker(node))

    figures = run_failover(kafka_cluster, unique_name("failover"),
                           "SIGKILL of partition leaders", fault_report, kills, faults_full)
    assert all(t < (60 if f["broker"] == f["active_controller"] else 30)
               for family in figures.values() for f in family["faults"]
               for t in f["first_record_s"].values()), figures
