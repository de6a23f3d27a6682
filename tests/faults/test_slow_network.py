"""Fault: every client connection goes through a loopback proxy that delays each forwarded
chunk and aborts all connections every few seconds (priority_kafka/testing/_proxy.py; the broker
advertises the proxy's port, so reconnects go through it too): nothing acknowledged is lost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks._traffic import Tally
from priority_kafka.testing import LocalKafkaBroker, _free_port
from priority_kafka.testing._proxy import LossyProxy
from tests.conftest import over_families
from tests.faults.common import run_under_load

pytestmark = [pytest.mark.faults, pytest.mark.integration]

LATENCY_S, DROP_EVERY_S = 0.02, 3.0


@pytest.fixture
def proxied_broker() -> Iterator[tuple[LocalKafkaBroker, LossyProxy]]:
    """A broker of this test alone whose advertised address is a lossy proxy in front of it."""
    broker_port, proxy_port = _free_port(), _free_port()
    with (
        LossyProxy(proxy_port, broker_port, latency_s=LATENCY_S) as proxy,
        LocalKafkaBroker({"num.partitions": 2}, port=broker_port,
                         advertised_port=proxy_port) as broker,
    ):
        yield broker, proxy


@over_families("synchronous", argname="client")
def test_slow_flaky_network_loses_nothing(
    proxied_broker: tuple[LocalKafkaBroker, LossyProxy], faults_full: bool, fault_report: Any,
    client: str,
) -> None:
    """With 20 ms added per forwarded chunk and every connection aborted every 3 s, producer
    and executor (on either client family) lose no acknowledged record and keep each key's
    order."""
    broker, proxy = proxied_broker
    hold_s = 60.0 if faults_full else 12.0

    def flaky(tally: Tally) -> dict[str, Any]:
        deadline = time.monotonic() + hold_s
        while time.monotonic() < deadline:  # the fault lasts this long; nothing to wait for
            time.sleep(DROP_EVERY_S)
            proxy.abort_all()
        return {"latency_ms": LATENCY_S * 1000, "drop_every_s": DROP_EVERY_S,
                "held_s": hold_s, "connections_dropped": proxy.drops}

    figures = run_under_load(broker.bootstrap_servers, "slow", flaky, rate=200, client=client)
    fault_report(
        f"slow network (proxy: +20 ms per chunk, all connections cut every 3 s, {client})",
        **figures,
    )
    assert figures["lost"] == 0 and figures["send_failures"] == 0
    assert figures["order_violations"] == 0
    assert figures["connections_dropped"] > 0
