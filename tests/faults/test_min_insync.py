"""Fault: the in-sync replicas fall below ``min.insync.replicas`` under traffic on the 3-node
cluster (both client families end to end, producers with acks=all and idempotence): every
write is refused (NOT_ENOUGH_REPLICAS), the producers retry until the replicas are back, and
nothing acknowledged is lost, nothing is out of order, no send fails.

The topic has 3 replicas and ``min.insync.replicas=3``, and one node is stopped (SIGTERM): the
in-sync replicas are 2 of the 3 required. (With min ISR 2 it would take two nodes down, and
the cluster's nodes are also its controller quorum, which does not survive two of three.)
Reduced size: down for 5 s; ``--faults-full``: 30 s (within the producers' 120 s delivery
timeout: past it, sends would fail and be reported, not lost)."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from tests.faults.common import Tally, run_under_load
from tests.faults.failover import Failover, replicated_topic

pytestmark = [pytest.mark.faults, pytest.mark.integration]


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_isr_below_min_insync_is_refused_retried_and_loses_nothing(
    kafka_cluster: Any, faults_full: bool, fault_report: Any, client: str, unique_name: Any
) -> None:
    """The producer retries NOT_ENOUGH_REPLICAS; 0 lost, 0 order violations, 0 send failures,
    and every partition flows again once the node is back."""
    name = replicated_topic(kafka_cluster, unique_name("minisr"), min_insync=3)
    hold_s = 30.0 if faults_full else 5.0

    def below_min_isr(tally: Tally) -> dict[str, Any]:
        failover = Failover(kafka_cluster, name, tally, steady_s=10 if faults_full else 3)
        # The node leading the fewest of the topic's partitions: mostly a follower.
        led = list(failover.leaders().values())
        node = min(kafka_cluster.broker_ids, key=led.count)
        failover.fault(f"node {node} down {hold_s:g} s (ISR 2 < min ISR 3)", node,
                       lambda: kafka_cluster.stop_broker(node, signal.SIGTERM),
                       lambda: kafka_cluster.start_broker(node),
                       hold_s=hold_s, flows_during=False)
        return failover.figures()

    figures = run_under_load(kafka_cluster.bootstrap_servers, name, below_min_isr,
                             client=client, producer_client=client,
                             producer_configs={"acks": "all"})
    fault_report(f"ISR below min.insync.replicas ({client})", **figures)
    assert figures["lost"] == 0 and figures["order_violations"] == 0, figures
    assert figures["send_failures"] == 0, figures
    refused = {e: n for e, n in figures["retried_errors"].items()
               if "NotEnoughReplicas" in e or "Not enough in-sync replicas" in e}
    assert refused, f"the producer never saw NOT_ENOUGH_REPLICAS: {figures['retried_errors']}"
