"""Fault: SIGKILL of the leader of a partition of each level in turn, under traffic, on the
3-node cluster (replication factor 3, min ISR 2, producer acks=all): nothing acknowledged is
lost, no key goes out of order, and records are handled again soon after each kill. Reduced
size: one round (3 kills); ``--faults-full``: 10 rounds."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from priority_kafka import create_priority_topics
from tests.faults.common import LEVELS, Tally, run_under_load
from tests.test_executor import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.integration]


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_sigkill_of_each_levels_leader_loses_nothing(
    kafka_cluster: Any, faults_full: bool, fault_report: Any, client: str, unique_name: Any
) -> None:
    """Kill the leader of partition 0 of level 0, 1, 2 in turn (SIGKILL), bring it back and
    wait until in sync before the next: 0 acknowledged records lost, 0 order violations, and
    a record (of any level) handled within 30 s of each kill."""
    name = unique_name("failover")
    create_priority_topics(kafka_cluster.bootstrap_servers, name, LEVELS, num_partitions=2,
                           replication_factor=3, min_insync_replicas=2)

    def kills(tally: Tally) -> dict[str, Any]:
        recoveries: list[dict[str, Any]] = []
        for _ in range(10 if faults_full else 1):
            for level in range(LEVELS):
                topic = f"{name}-{level}"
                leader = kafka_cluster.leader_of(topic, 0)
                killed = time.monotonic()
                kafka_cluster.stop_broker(leader, signal.SIGKILL)
                wait_for(lambda t=topic, old=leader: kafka_cluster.leader_of(t, 0)
                         not in (None, old), 60, "a new leader")
                elected = time.monotonic() - killed
                wait_for(lambda k=killed: tally.first_handled_after(k) is not None, 60,
                         "a record handled after the kill")
                # Any level's record: the tally does not tell partitions apart.
                first = tally.first_handled_after(killed) or 0.0
                recoveries.append({"level": level, "killed": leader,
                                   "new_leader_s": round(elected, 2),
                                   "first_record_any_level_s": round(first, 2)})
                kafka_cluster.start_broker(leader)
                kafka_cluster.wait_in_sync()
        return {"kills": recoveries}

    figures = run_under_load(kafka_cluster.bootstrap_servers, name, kills, client=client,
                             producer_configs={"acks": "all"})
    fault_report(f"SIGKILL of a partition leader per level ({client})", **figures)
    assert figures["lost"] == 0 and figures["order_violations"] == 0, figures
    assert all(k["first_record_any_level_s"] < 30 for k in figures["kills"]), figures
