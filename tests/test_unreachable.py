"""An unreachable cluster fails fast: every bootstrap address refusing the connection is
reported within seconds by both client families (consumer, producer, CLI), naming the
addresses and what to check, with librdkafka's repeated log lines folded and every client
closed; an address that accepts and never answers still waits its whole timeout. Real sockets:
a refused port needs no broker. (A plaintext client on a TLS listener: tests/test_tls.py.)"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from priority_kafka import PriorityConsumer, PriorityProducer
from priority_kafka.confluent import PriorityConsumer as CConsumer
from priority_kafka.confluent import PriorityProducer as CProducer
from priority_kafka.families import CONFLUENT, Family
from tests.conftest import names_having, over_families

# Every address refuses for a second before the error (REFUSED_FOR_S), plus reconnect
# backoff; the margin is for a loaded machine.
FAIL_FAST_S = 5.0
# What the error says to check (and the family's name of security.protocol).
HINTS = ("Check that a broker is running there", "advertised.listeners")


def refused_address() -> str:
    """127.0.0.1 and a port nothing listens on (bound and released: the kernel refuses it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def silent_address() -> Iterator[str]:
    """An address that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def kafka_io_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("kafka-io")}


def consume_until_error(family: Family, servers: str, **settings: Any) -> tuple[Any, float, Any]:
    """(the error a 3-level consumer of ``family`` raises, after how many seconds, the
    consumer if one was built); polls for at most 60 s."""
    start = time.monotonic()
    consumer: Any = None
    with pytest.raises(Exception) as caught:  # which type: checked by the caller, per family
        if not family.librdkafka:
            consumer = PriorityConsumer("orders", max_priority=3, group_id="g",
                                        bootstrap_servers=servers, **settings)
            while time.monotonic() - start < 60:
                consumer.poll(timeout_ms=500)
        else:
            consumer = CConsumer({"bootstrap.servers": servers, "max.priority": 3,
                                  "group.id": "g", **settings})
            consumer.subscribe(["orders"])
            while time.monotonic() - start < 60:
                consumer.consume(10, 0.5)
    return caught.value, time.monotonic() - start, consumer


def produce_until_error(family: Family, servers: str,
                        reports: list[Any]) -> tuple[Any, float, Any]:
    """As :func:`consume_until_error` for a producer sending one record and waiting for it;
    ``reports`` gets confluent's delivery reports."""
    start = time.monotonic()
    producer: Any = None
    with pytest.raises(Exception) as caught:  # which type: checked by the caller, per family
        if not family.librdkafka:
            producer = PriorityProducer(max_priority=3, bootstrap_servers=servers)
            producer.send("orders", b"x", priority=2).get(60)
        else:
            producer = CProducer({"bootstrap.servers": servers, "max.priority": 3})
            producer.produce("orders", b"x", priority=2,
                             on_delivery=lambda error, message: reports.append(error))
            producer.flush(60)
    return caught.value, time.monotonic() - start, producer


def assert_says_unreachable(error: BaseException, family: Family, addresses: list[str]) -> None:
    text = str(error)
    assert "Cannot reach the Kafka cluster" in text, text
    for address in addresses:
        assert address in text, text
    for hint in (*HINTS, family.key("security.protocol")):
        assert hint in text, text


@pytest.mark.parametrize("count", [1, 2])
@over_families("fail_fast")
def test_a_consumer_whose_every_address_refuses_fails_within_seconds(family, count):
    """One or two refused bootstrap addresses: the consumer raises within seconds naming each
    address and what to check; kafka-python leaves no IO thread, confluent closed every level
    (a later call raises the same error)."""
    addresses = [refused_address() for _ in range(count)]
    before = kafka_io_threads()
    error, after, consumer = consume_until_error(family, ",".join(addresses))
    assert after < FAIL_FAST_S, (after, str(error))
    assert_says_unreachable(error, family, addresses)
    if not family.librdkafka:
        assert type(error).__name__ == "ClusterUnreachableError"
        assert consumer is None  # the constructor raised
        assert kafka_io_threads() <= before
    else:
        with pytest.raises(type(error)) as again:
            consumer.consume(1, 0)
        assert again.value is error
        consumer.close()  # closing again does nothing


@over_families("fail_fast")
def test_a_producer_whose_every_address_refuses_fails_within_seconds(family):
    """The producer of each family raises within seconds; confluent's, asking for the
    topic's levels before it queues the record, queues nothing and is closed."""
    address = refused_address()
    reports: list[Any] = []
    before = kafka_io_threads()
    error, after, producer = produce_until_error(family, address, reports)
    assert after < FAIL_FAST_S, (after, str(error))
    assert_says_unreachable(error, family, [address])
    if not family.librdkafka:
        assert producer is None and kafka_io_threads() <= before
    else:
        from confluent_kafka import KafkaError

        assert [r.code() for r in reports] in ([], [KafkaError._PURGE_QUEUE])
        with pytest.raises(RuntimeError, match="closed"):
            producer.flush(0)


def test_confluent_folds_librdkafka_lines_to_one_per_address(caplog, capfd):
    """librdkafka logs every failed attempt of each level's consumer (~1,700 lines before the
    error, unbounded after); what reaches the log is one line per address, repeats at DEBUG,
    and nothing on stderr directly."""
    addresses = [refused_address(), refused_address()]
    with caplog.at_level(logging.INFO, logger="priority_kafka.librdkafka"):
        consume_until_error(CONFLUENT, ",".join(addresses))
    shown = [r.getMessage() for r in caplog.records
             if r.name == "priority_kafka.librdkafka" and r.levelno > logging.DEBUG]
    for address in addresses:
        refusals = [line for line in shown if f"{address}/bootstrap" in line]
        assert len(refusals) == 1, shown
    assert "|FAIL|" not in capfd.readouterr().err


@over_families("fail_fast")
def test_an_address_that_never_answers_still_waits_its_timeout(family, silent_address):
    """A listener that accepts and never answers is not a refusal: kafka-python waits its whole
    bootstrap_timeout_ms, confluent's subscribe() its whole wait for the topic list (10 s)
    before it says the metadata did not come."""
    if not family.librdkafka:
        error, after, _ = consume_until_error(family, silent_address, bootstrap_timeout_ms=3000)
        assert type(error).__name__ == "KafkaTimeoutError" and after >= 2.9, (after, error)
        return
    from confluent_kafka import KafkaException

    start = time.monotonic()
    with CConsumer({"bootstrap.servers": silent_address, "max.priority": 3,
                    "group.id": "g"}) as consumer, pytest.raises(KafkaException) as caught:
        consumer.subscribe(["orders"])
    after = time.monotonic() - start
    assert after >= 9.5 and "Cannot reach" not in str(caught.value), (after, caught.value)


CONSUME = ["consume", "cli_handler:fail_odd", "-t", "orders", "-g", "g", "-n", "3",
           "--duration", "60", "--app-dir", str(Path(__file__).resolve().parent)]


@pytest.mark.parametrize("command", [
    *([*CONSUME, "--client", name] for name in names_having("fail_fast")),
    ["topics", "describe", "orders"],
    ["lag", "orders", "-g", "g", "-n", "3"],
    ["produce", "orders", "-n", "3", "--count", "10"],
], ids=[*(f"consume-{name}" for name in names_having("fail_fast")), "topics", "lag", "produce"])
def test_the_cli_reports_a_refused_address_within_seconds(command, capsys):
    """Each command that connects exits 2 (bad input: the address given) within seconds with
    one line naming the address and what to check."""
    from tests.test_cli import run_cli

    address = refused_address()
    start = time.monotonic()
    status, _, err = run_cli(capsys, *command, "-b", address)
    after = time.monotonic() - start
    assert status == 2 and after < FAIL_FAST_S, (status, after, err)
    assert address in err and HINTS[0] in err and len(err.strip().splitlines()) == 1, err


def watch_clock(monkeypatch) -> Callable[[float], None]:
    """Make the watch's clock a fake one; returns the function that advances it."""
    from priority_kafka.confluent import _login

    now = [1000.0]
    monkeypatch.setattr(_login.time, "monotonic", lambda: now[0])

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


def test_confluent_refusals_after_the_cluster_was_reached_are_not_unreachable(monkeypatch):
    """Once a broker of the cluster's metadata was named (the cluster was reached), the
    bootstrap address refusing (the whole cluster restarting) is left to librdkafka's
    reconnects; before that, a second of refusals raises."""
    from confluent_kafka import KafkaError, KafkaException

    from priority_kafka.confluent._login import LoginWatch

    advance = watch_clock(monkeypatch)
    refused = KafkaError(KafkaError._TRANSPORT, "127.0.0.1:9/bootstrap: Connect to "
                         "ipv4#127.0.0.1:9 failed: Connection refused (after 0ms in state CONNECT)")
    fresh = LoginWatch(config={"bootstrap.servers": "127.0.0.1:9"})
    fresh.error_cb()(refused)
    fresh.check()  # not a second yet
    advance(1.0)
    with pytest.raises(KafkaException, match=r"127\.0\.0\.1:9"):
        fresh.check()

    reached = LoginWatch(config={"bootstrap.servers": "127.0.0.1:9"})
    seen = reached.error_cb()
    seen(KafkaError(KafkaError._TRANSPORT, "127.0.0.1:9/1: Disconnected (after 5000ms in "
                    "state UP)"))
    seen(refused)
    advance(30.0)
    seen(refused)
    reached.check()
    assert reached.unreachable is None


@pytest.mark.spark
@over_families("fail_fast", "spark_reader")
def test_the_spark_driver_reports_a_refused_address_within_seconds(family):
    """The Spark source's driver (listing the topic's partitions) fails within seconds on a
    refused address, naming it and what to check, with either client."""
    from priority_kafka.spark.driver import open_driver
    from priority_kafka.spark.options import parse_options

    address = refused_address()
    options = parse_options({"kafka.bootstrap.servers": address, "client": family.name,
                             "subscribe": "orders", "maxpriority": "3"}, streaming=False)
    start = time.monotonic()
    with pytest.raises(Exception) as caught:  # KafkaCallError or the client's own, per client
        driver = open_driver(options)
        try:
            driver.partitions()
        finally:
            driver.close()
    after = time.monotonic() - start
    assert after < FAIL_FAST_S, (after, str(caught.value))
    assert_says_unreachable(caught.value, family, [address])


def test_the_executor_on_confluent_stops_naming_a_refused_address():
    """A ShardedExecutor over the confluent consumer (whose constructor does not connect; the
    kafka-python one raises before an executor exists) stops within seconds with the error,
    its consumer closed."""
    from priority_kafka import ShardedExecutor

    address = refused_address()
    consumer = CConsumer({"bootstrap.servers": address, "max.priority": 3, "group.id": "g",
                          "enable.auto.commit": False})
    executor = ShardedExecutor(consumer, lambda record: None)
    start = time.monotonic()
    with pytest.raises(Exception) as caught:  # confluent's KafkaException
        executor.subscribe(["orders"])  # the levels' check asks the cluster: it raises here
        executor.run()
    assert time.monotonic() - start < FAIL_FAST_S, str(caught.value)
    assert_says_unreachable(caught.value, CONFLUENT, [address])
    with pytest.raises(type(caught.value)):
        consumer.consume(1, 0)
