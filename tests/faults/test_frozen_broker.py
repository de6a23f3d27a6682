"""Fault: the broker stops answering (SIGSTOP) while the executor has something to commit. The
commit fails after ``commit_timeout_ms``, named in a warning, and the executor stops within
seconds, on either client family; nothing is committed past a record not handled."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaTimeoutError
from kafka.structs import TopicPartition

from benchmarks._common import create_topics
from benchmarks._running import Running, wait_for
from priority_kafka import PriorityProducer
from priority_kafka.executor import ShardedExecutor
from priority_kafka.executor._clients import as_client
from priority_kafka.families import family as registered
from priority_kafka.testing import LocalKafkaBroker, _free_port
from priority_kafka.testing._proxy import ProxyLoop
from tests.conftest import over_families
from tests.test_executor_offset_map import member

pytestmark = [pytest.mark.faults, pytest.mark.integration]

RECORDS, HELD = 20, 10
COMMIT_TIMEOUT_MS = 1500
#: The confluent adapter's helper threads: a commit past its deadline, a close past it.
_LEFT_RUNNING = ("the executor's offset commit", "close the executor's consumer")


def freeze(pid: int) -> None:
    """SIGSTOP ``pid`` and wait until every one of its threads has stopped (the signal is
    delivered asynchronously: a JVM thread already running could still answer a request)."""
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:  # "pid (comm) S ...": the state follows the last ")"
                states.append((task / "stat").read_text().rpartition(")")[2].split()[0])
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
        return all(state in "tT" for state in states)

    wait_for(stopped, 10, f"every thread of process {pid} to stop")


def wait_committed(bootstrap: str, group: str, topic: str, offset: int, timeout_s: float) -> None:
    """Wait until ``group`` has committed ``offset`` on partition 0 of ``topic``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    try:
        wait_for(lambda: consumer.committed(TopicPartition(topic, 0)) == offset, timeout_s,
                 f"a commit at offset {offset}")
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close()


@over_families("synchronous", argname="client")
def test_a_broker_that_stops_answering_cannot_hang_the_executor(
    kafka_broker: Any, unique_name: Callable[[str], str], client: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Record 10 is held until the broker is frozen: the commit of the records up to 20 then
    gets no answer and fails after commit_timeout_ms (1.5 s), named in a warning. kafka-python
    goes on; its stop() commits (failing the same way) and closes within the same bound.
    confluent-kafka runs one call at a time on a consumer, so every call would wait behind the
    commit: the executor stops at once, run() raising what blocks it. Either way stop()
    returns within seconds while the broker is still frozen; once it answers again, the
    group's commit is 10 or 20, never past a record not handled."""
    assert isinstance(kafka_broker, LocalKafkaBroker), "the test freezes its local broker"
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = unique_name("frozen"), unique_name("g")
    create_topics(bootstrap, [topic])
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(RECORDS):
        producer.send(topic, f"{i}".encode(), partition=0)
    producer.close()
    release = threading.Event()
    handled: list[int] = []

    def handler(record: Any) -> None:
        if record.offset == HELD:
            release.wait(60)
        handled.append(record.offset)

    executor = ShardedExecutor(member(client, bootstrap, group), handler, shards=2,
                               ordering="unordered", commit_interval_ms=100,
                               commit_timeout_ms=COMMIT_TIMEOUT_MS)
    executor.subscribe([topic])
    running = Running(executor)
    pid = kafka_broker.pid
    frozen = False
    try:
        wait_for(lambda: len(handled) == RECORDS - 1, 60, "every record but the held one")
        # Asked of the broker: the executor commits only what changed, so a count of commits
        # sampled after the last one had gone out would wait for ever (it did, under load).
        wait_committed(bootstrap, group, topic, HELD, 30)
        freeze(pid)
        frozen = True
        with caplog.at_level(logging.WARNING):
            release.set()
            wait_for(lambda: executor.stats().commit_failures > 0, 30, "the commit to fail")
            started = time.monotonic()
            # librdkafka's adapter commits synchronously on the polling thread (it blocks);
            # kafka-python's periodic commit is sent in the background.
            if registered(client).librdkafka:
                assert running.ended.wait(30), "the blocked confluent executor did not stop"
                assert "the consumer is blocked: a synchronous commit has not returned for" in (
                    str(running.error))
            else:
                assert running.error is None
            running.executor.stop()
            running.thread.join(30)
            stopped_in = time.monotonic() - started
        assert not running.thread.is_alive(), "the executor did not stop"
        print(f"{client}: stopped {stopped_in:.1f} s after the first failed commit, the broker "
              f"frozen; {executor.stats().commit_failures} failed commit(s); run() "
              f"raised {running.error!r}")
        assert stopped_in < 15
        assert len(handled) == RECORDS
        failed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("commit of")]
        assert failed, caplog.text
        # kafka-python's periodic commit is sent in the background: unanswered past the bound.
        timed_out = ("TimeoutError(\"the executor's offset commit did not return within 1.5 s"
                     if registered(client).librdkafka else
                     "TimeoutError(\"the executor's offset commit got no answer within 1.")
        assert timed_out in failed[0], failed[0]
    finally:
        if frozen:
            os.kill(pid, signal.SIGCONT)
        release.set()
    # What the adapter left running ends once the broker answers.
    wait_for(lambda: not any(t.name in _LEFT_RUNNING for t in threading.enumerate()), 90,
             "the blocked commit and close to return")
    assert committed(bootstrap, group, topic) in (HELD, RECORDS)



def test_a_flush_of_slow_batches_returns_within_its_timeout(
    unique_name: Callable[[str], str],
) -> None:
    """A broker behind a proxy that delays each way by 0.2 s, ten batches to one partition, one
    request in flight: each batch finishes about 0.4 s after the one before. ``flush(1.0)``
    raises KafkaTimeoutError after 1 s in all, naming the batches left (kafka-python's own
    flush bounds each batch's wait, not the flush: FLUSH_TIMEOUT_PER_BATCH); a second flush
    delivers them all."""
    broker_port, proxy_port = _free_port(), _free_port()
    proxies = ProxyLoop("slow-flush").start()
    try:
        proxies.listen(broker_port, proxy_port, latency_s=0.2)
        with LocalKafkaBroker(port=broker_port, advertised_port=proxy_port) as broker:
            topic = unique_name("flush")
            create_topics(broker.bootstrap_servers, [f"{topic}-0"])
            producer = PriorityProducer(
                bootstrap_servers=broker.bootstrap_servers, max_priority=1, batch_size=16,
                max_in_flight_requests_per_connection=1, linger_ms=0)
            try:
                producer.send(topic, b"first").get(30)  # metadata known, connected
                futures = [producer.send(topic, b"x" * 64) for _ in range(10)]
                started = time.monotonic()
                with pytest.raises(KafkaTimeoutError,
                                   match=r"batch\(es\) still unsent after 1 s"):
                    producer.flush(timeout=1.0)
                took = time.monotonic() - started
                producer.flush(timeout=60)
                assert all(future.succeeded() for future in futures)
            finally:
                producer.close(timeout=10)
    finally:
        proxies.stop()
    print(f"flush(timeout=1.0) of 10 batches ~0.4 s apart raised after {took:.2f} s")
    assert took < 2.0


@over_families("synchronous", argname="client")
def test_reading_the_commits_of_new_partitions_from_a_frozen_broker_is_bounded(
    kafka_broker: Any, unique_name: Callable[[str], str], client: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The executor's polling thread reads the commits of newly assigned partitions before
    their records run (every level waits meanwhile). With the coordinator frozen, that read
    gives up after COMMITTED_TIMEOUT_MS (2 s here) and raises; kafka-python's own wait for a
    coordinator that does not answer had no end."""
    assert isinstance(kafka_broker, LocalKafkaBroker), "the test freezes its local broker"
    monkeypatch.setattr(f"{registered(client).package}._client.COMMITTED_TIMEOUT_MS", 2000)
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = unique_name("frozen-read"), unique_name("g")
    create_topics(bootstrap, [topic])
    consumer = member(client, bootstrap, group)
    reader = as_client(consumer)
    partitions = [TopicPartition(topic, 0)]
    assert reader.fetch_committed(partitions) == {}  # the coordinator known and answering
    outcome: list[BaseException | dict[Any, Any]] = []

    def read() -> None:
        try:
            outcome.append(reader.fetch_committed(partitions))
        except Exception as exc:
            outcome.append(exc)

    reading = threading.Thread(target=read, name="read-commits", daemon=True)
    freeze(kafka_broker.pid)
    try:
        started = time.monotonic()
        reading.start()
        reading.join(20)
        took = time.monotonic() - started
        assert not reading.is_alive(), "the read of the commits is still waiting"
    finally:
        os.kill(kafka_broker.pid, signal.SIGCONT)
        reading.join(60)
        consumer.close()
    print(f"{client}: the read of a commit from a frozen broker gave up after {took:.1f} s: "
          f"{outcome!r}")
    assert len(outcome) == 1 and isinstance(outcome[0], Exception), outcome
    assert took < 12
