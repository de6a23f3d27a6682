"""Fault: controlled shutdowns (SIGTERM) under traffic on the 3-node cluster (replication factor
3, min ISR 2, producers acks=all with idempotence), both client families at once, each end to
end on a topic of its own: nothing acknowledged is lost, no key goes out of order, no send
fails, and every partition flows again within seconds.

A node stopped with SIGTERM hands its leaderships over before it exits. Reduced size: the node
leading the most partitions of the kafka-python topic, stopped, started again once every
partition flows without it, and the cluster back in sync. ``--faults-full``: each node in turn
stopped and kept down for 10 s, then two rolling restarts (each node stopped, started again,
in sync before the next: 9 shutdowns)."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from tests.faults.failover import Failover, run_failover

pytestmark = [pytest.mark.faults, pytest.mark.integration]

DOWN_S = 10.0  # full size, first round: how long each node stays down


def test_controlled_shutdowns_and_rolling_restarts_lose_nothing(
    kafka_cluster: Any, faults_full: bool, fault_report: Any, unique_name: Any
) -> None:
    """0 acknowledged records lost, 0 order violations, 0 send failures on either family;
    every partition handles a record sent after each shutdown within 10 s."""

    def shutdowns(failover: Failover) -> None:
        if faults_full:
            plan = [(node, hold_s) for hold_s in (DOWN_S, 0.0, 0.0)
                    for node in kafka_cluster.broker_ids]
        else:
            led = list(failover.leaders().values())
            plan = [(max(kafka_cluster.broker_ids, key=led.count), 0.0)]
        for node, hold_s in plan:
            failover.fault(
                f"SIGTERM of node {node}" + (f", down {hold_s:g} s" if hold_s else ""), node,
                lambda n=node: kafka_cluster.stop_broker(n, signal.SIGTERM),
                lambda n=node: kafka_cluster.start_broker(n), hold_s=hold_s)

    figures = run_failover(kafka_cluster, unique_name("shutdown"),
                           "controlled shutdown / rolling restart", fault_report, shutdowns,
                           faults_full)
    assert all(t < 10 for family in figures.values() for f in family["faults"]
               for t in f["first_record_s"].values()), figures
