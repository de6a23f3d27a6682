"""Fault: SIGKILL of partition leaders under traffic on the 3-node cluster (replication factor 3,
min ISR 2, producer acks=all, both client families end to end): nothing acknowledged is lost,
no key goes out of order, and every partition flows again soon after each kill.

Reduced size: kill leaders until every level has lost the leader of one of its partitions
(one or two kills: a node leads two of the six partitions); ``--faults-full``: 10 rounds of
killing the leader of partition 0 of level 0, 1, 2 in turn (30 kills). Each killed node is
started again and the cluster back in sync before the next kill."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from tests.faults.common import LEVELS, Tally, run_under_load
from tests.faults.failover import Failover, replicated_topic

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _victims(failover: Failover, full: bool, level: int) -> int:
    """The node to kill next: the leader of ``level``'s partition 0 (full size), or the node
    leading partitions of the most levels not yet hit (reduced)."""
    leaders = failover.leaders()
    if full:
        leader = leaders[(level, 0)]
        assert leader is not None
        return leader
    hit = {lv for f in failover.faults for lv in (int(w.split("-")[0]) for w in f["led"])}
    levels_led: dict[int, set[int]] = {}
    for (lv, _), leader in leaders.items():
        if leader is not None and lv not in hit:
            levels_led.setdefault(leader, set()).add(lv)
    return max(levels_led, key=lambda node: len(levels_led[node]))


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_sigkill_of_leaders_loses_nothing(
    kafka_cluster: Any, faults_full: bool, fault_report: Any, client: str, unique_name: Any
) -> None:
    """0 acknowledged records lost, 0 order violations, no send failure, and every partition
    (those whose leader died and the others) handles a record sent after each kill within
    30 s."""
    name = replicated_topic(kafka_cluster, unique_name("failover"))

    def kills(tally: Tally) -> dict[str, Any]:
        failover = Failover(kafka_cluster, name, tally, steady_s=10 if faults_full else 3)
        rounds = [level for _ in range(10) for level in range(LEVELS)] if faults_full else []
        while (rounds and len(failover.faults) < len(rounds)) or (
            not rounds and len({w.split("-")[0] for f in failover.faults for w in f["led"]})
            < LEVELS
        ):
            level = rounds[len(failover.faults)] if rounds else 0
            node = _victims(failover, faults_full, level)
            failover.fault(f"SIGKILL of node {node}", node,
                           lambda n=node: kafka_cluster.stop_broker(n, signal.SIGKILL),
                           lambda n=node: kafka_cluster.start_broker(n))
        return failover.figures()

    figures = run_under_load(kafka_cluster.bootstrap_servers, name, kills, client=client,
                             producer_client=client, producer_configs={"acks": "all"})
    fault_report(f"SIGKILL of partition leaders ({client})", **figures)
    assert figures["lost"] == 0 and figures["order_violations"] == 0, figures
    assert figures["send_failures"] == 0, figures
    assert all(t < 30 for f in figures["faults"] for t in f["first_record_s"].values()), figures
