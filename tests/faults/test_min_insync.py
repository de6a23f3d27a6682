"""Fault: the in-sync replicas fall below ``min.insync.replicas`` under traffic on the 3-node
cluster, both client families at once (producers acks=all with idempotence), each end to end
on a topic of its own: the leaders refuse writes (NOT_ENOUGH_REPLICAS), the producers retry
until the replicas are back, and nothing acknowledged is lost, nothing is out of order, no send
fails.

That the cluster refuses is checked with a probe: one record sent with ``acks=all`` and no
retries to a third topic of the same settings while the node is down must fail with
NOT_ENOUGH_REPLICAS. The traffic's producers report how often they were refused and retried
(``retried_errors``), not asserted: a producer whose requests were all appended before the ISR
shrank waits for them (the high watermark does not move while the ISR is below the minimum)
instead of being refused, as librdkafka did in one run on a loaded machine.

The topics have 3 replicas and ``min.insync.replicas=3``, and one node is stopped (SIGTERM):
the in-sync replicas are 2 of the 3 required. (With min ISR 2 it would take two nodes down,
and the cluster's nodes are also its controller quorum, which does not survive two of three.)
Reduced size: down for 4 s; ``--faults-full``: 30 s (within the producers' 120 s delivery
timeout: past it, sends would fail and be reported, not lost)."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from benchmarks._running import wait_for
from priority_kafka import create_priority_topics
from priority_kafka.testing import LocalKafkaCluster
from tests.faults.failover import Failover, run_failover

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _probe(cluster: LocalKafkaCluster, topic: str, down: int) -> str:
    """Once ``down`` is out of ``topic``'s ISR: the error of one record sent with acks=all and
    no retry (the name of kafka-python's error class, or "accepted")."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.errors import KafkaError

    def shrunk() -> bool:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            (described,) = admin.describe_topics([topic])
        finally:
            admin.close()
        return down not in described["partitions"][0]["isr_nodes"]

    wait_for(shrunk, 60, f"node {down} out of {topic}'s in-sync replicas")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                             retries=0, enable_idempotence=False)
    try:
        producer.send(topic, b"probe").get(30)
        return "accepted"
    except KafkaError as exc:
        return type(exc).__name__
    finally:
        producer.close(timeout=10)


def test_isr_below_min_insync_is_refused_retried_and_loses_nothing(
    kafka_cluster: Any, faults_full: bool, fault_report: Any, unique_name: Any
) -> None:
    """Each family's producer retries NOT_ENOUGH_REPLICAS; 0 lost, 0 order violations, 0 send
    failures, and every partition flows again once the node is back."""
    hold_s = 30.0 if faults_full else 4.0

    probe = unique_name("minisr-probe")
    create_priority_topics(kafka_cluster.bootstrap_servers, probe, 1, replication_factor=3,
                           min_insync_replicas=3)
    refused: list[str] = []

    def stop_and_probe(node: int) -> None:
        kafka_cluster.stop_broker(node, signal.SIGTERM)
        refused.append(_probe(kafka_cluster, f"{probe}-0", node))

    def below_min_isr(failover: Failover) -> dict[str, Any]:
        # The node leading the fewest partitions of the kafka-python topic: mostly a follower.
        led = list(failover.leaders().values())
        node = min(kafka_cluster.broker_ids, key=led.count)
        failover.fault(f"node {node} down {hold_s:g} s (ISR 2 < min ISR 3)", node,
                       lambda: stop_and_probe(node),
                       lambda: kafka_cluster.start_broker(node),
                       hold_s=hold_s, flows_during=False)
        return {"probe": refused}

    run_failover(kafka_cluster, unique_name("minisr"),
                           "ISR below min.insync.replicas", fault_report, below_min_isr,
                           faults_full, min_insync=3)
    assert refused == ["NotEnoughReplicasError"], refused
