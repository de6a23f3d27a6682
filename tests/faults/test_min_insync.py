"""Fault: the in-sync replicas fall below ``min.insync.replicas`` under traffic on the 3-node
cluster, both client families at once (producers acks=all with idempotence), each end to end
on a topic of its own: every write is refused (NOT_ENOUGH_REPLICAS), the producers retry until
the replicas are back, and nothing acknowledged is lost, nothing is out of order, no send
fails.

The topics have 3 replicas and ``min.insync.replicas=3``, and one node is stopped (SIGTERM):
the in-sync replicas are 2 of the 3 required. (With min ISR 2 it would take two nodes down,
and the cluster's nodes are also its controller quorum, which does not survive two of three.)
Reduced size: down for 4 s; ``--faults-full``: 30 s (within the producers' 120 s delivery
timeout: past it, sends would fail and be reported, not lost)."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from tests.faults.failover import Failover, run_failover

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def test_isr_below_min_insync_is_refused_retried_and_loses_nothing(
    kafka_cluster: Any, faults_full: bool, fault_report: Any, unique_name: Any
) -> None:
    """Each family's producer retries NOT_ENOUGH_REPLICAS; 0 lost, 0 order violations, 0 send
    failures, and every partition flows again once the node is back."""
    hold_s = 30.0 if faults_full else 4.0

    def below_min_isr(failover: Failover) -> None:
        # The node leading the fewest partitions of the kafka-python topic: mostly a follower.
        led = list(failover.leaders().values())
        node = min(kafka_cluster.broker_ids, key=led.count)
        failover.fault(f"node {node} down {hold_s:g} s (ISR 2 < min ISR 3)", node,
                       lambda: kafka_cluster.stop_broker(node, signal.SIGTERM),
                       lambda: kafka_cluster.start_broker(node),
                       hold_s=hold_s, flows_during=False)

    figures = run_failover(kafka_cluster, unique_name("minisr"),
                           "ISR below min.insync.replicas", fault_report, below_min_isr,
                           faults_full, min_insync=3)
    for family, figure in figures.items():
        refused = {e: n for e, n in figure["retried_errors"].items()
                   if "NotEnoughReplicas" in e or "Not enough in-sync replicas" in e}
        assert refused, f"{family} never saw NOT_ENOUGH_REPLICAS: {figure['retried_errors']}"
