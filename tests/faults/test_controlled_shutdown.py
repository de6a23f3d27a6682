"""Fault: controlled shutdowns (SIGTERM) of every node under traffic on the 3-node cluster
(replication factor 3, min ISR 2, acks=all, both client families end to end): nothing
acknowledged is lost, no key goes out of order, no send fails.

Reduced size: a rolling restart, each node in turn stopped with SIGTERM (it hands its
leaderships over first), started again once every partition flows without it, and the
cluster back in sync before the next. ``--faults-full``: first each node stopped and kept
down for 10 s, then two more rolling restarts (9 shutdowns)."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from tests.faults.common import Tally, run_under_load
from tests.faults.failover import Failover, replicated_topic

pytestmark = [pytest.mark.faults, pytest.mark.integration]

DOWN_S = 10.0  # full size, first round: how long each node stays down


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_controlled_shutdown_and_rolling_restart_lose_nothing(
    kafka_cluster: Any, faults_full: bool, fault_report: Any, client: str, unique_name: Any
) -> None:
    """0 acknowledged records lost, 0 order violations, 0 send failures; every partition
    handles a record sent after each shutdown within 10 s."""
    name = replicated_topic(kafka_cluster, unique_name("shutdown"))
    holds = [DOWN_S, 0.0, 0.0] if faults_full else [0.0]

    def shutdowns(tally: Tally) -> dict[str, Any]:
        failover = Failover(kafka_cluster, name, tally, steady_s=10 if faults_full else 3)
        for hold_s in holds:
            for node in kafka_cluster.broker_ids:
                failover.fault(
                    f"SIGTERM of node {node}" + (f", down {hold_s:g} s" if hold_s else ""), node,
                    lambda n=node: kafka_cluster.stop_broker(n, signal.SIGTERM),
                    lambda n=node: kafka_cluster.start_broker(n), hold_s=hold_s)
        return failover.figures()

    figures = run_under_load(kafka_cluster.bootstrap_servers, name, shutdowns, client=client,
                             producer_client=client, producer_configs={"acks": "all"})
    fault_report(f"controlled shutdown / rolling restart ({client})", **figures)
    assert figures["lost"] == 0 and figures["order_violations"] == 0, figures
    assert figures["send_failures"] == 0, figures
    assert all(t < 10 for f in figures["faults"] for t in f["first_record_s"].values()), figures
