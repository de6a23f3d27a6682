"""``async def`` handlers under ``run()``: tasks of the executor's own event-loop thread (the
LoopPool), no worker thread; key order, the drain on stop, the failure policies, nothing left
running afterwards; the loop's microsecond waits."""

from __future__ import annotations

import asyncio
import selectors
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from kafka.structs import TopicPartition

from benchmarks._executor import executor_consumer
from priority_kafka import HandlerError, ShardedExecutor
from priority_kafka._workers._loops import new_event_loop
from priority_kafka.budgets import Budgets
from tests.confluent.helpers import run_in_thread
from tests.conftest import over_families
from tests.fakes import FakeConsumer
from tests.test_executor import loaded_topic, note_sequence
from tests.test_executor_unit import running, wait_for

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
_WAIT_S = 60


class Threads:
    """The executor threads started since it was made (an earlier test's daemon stuck past
    its drain does not count)."""

    def __init__(self) -> None:
        self._before = set(threading.enumerate())

    def __call__(self) -> list[str]:
        return [t.name for t in threading.enumerate()
                if t.name.startswith("priority-kafka-") and t not in self._before]


def keyed(count: int, keys: int = 5) -> list[tuple[bytes, bytes]]:
    return [(str(i % keys).encode(), str(i).encode()) for i in range(count)]


@pytest.mark.integration
@over_families("synchronous", argname="client")
def test_async_handlers_under_run_are_tasks_of_one_loop_thread_in_key_order(
    bootstrap_servers: str, unique_name: Callable[[str], str], client: str
) -> None:
    """Every record runs on the executor's one event-loop thread (no worker thread exists),
    each key's records in order, at most ``async_concurrency`` at once; once run() returns no
    thread of the executor is left."""
    executor_threads = Threads()
    total = 600
    topic, _ = loaded_topic(bootstrap_servers, unique_name, "async-run", total, partitions=2,
                            keys=10)
    seen: dict[str, list[int]] = defaultdict(list)
    threads: set[str] = set()
    running_now = [0, 0]

    async def handler(record: Any) -> None:
        threads.add(threading.current_thread().name)
        running_now[0] += 1
        running_now[1] = max(running_now)
        await asyncio.sleep(0.001 * (record.offset % 3))
        running_now[0] -= 1
        note_sequence(seen, record)

    executor = ShardedExecutor(
        executor_consumer(client, bootstrap_servers, [topic]), handler, shards=16,
        async_concurrency=8,
    )
    with running(executor) as errors:
        wait_for(lambda: sum(map(len, seen.values())) >= total, _WAIT_S)
        during = executor_threads()
    assert not errors
    assert threads == {"priority-kafka-event-loop"}
    assert during == ["priority-kafka-event-loop"], during
    assert all(values == list(range(len(values))) for values in seen.values()), seen
    assert 1 < running_now[1] <= 8
    assert executor.stats().handled == total
    wait_for(lambda: not executor_threads(), 5)


def test_stop_lets_running_async_handlers_finish_and_commits_them_not_the_queued() -> None:
    """stop() drops the queued records; the ones running finish (drain) and are committed;
    the loop's thread ends with the run."""
    executor_threads = Threads()
    consumer = FakeConsumer({TP0: keyed(40, keys=40)}, max_poll_records=40)
    consumer.subscribe(["t"])
    started: list[int] = []
    finished: list[int] = []
    release = threading.Event()

    async def handler(record: Any) -> None:
        started.append(record.offset)
        while not release.is_set():
            await asyncio.sleep(0.005)
        finished.append(record.offset)

    executor = ShardedExecutor(consumer, handler, shards=4, commit_interval_ms=60_000)
    with running(executor) as errors:
        wait_for(lambda: len(started) == 4, _WAIT_S)
        assert executor_threads() == ["priority-kafka-event-loop"]
        executor.stop()
        time.sleep(0.05)  # the drain has begun: nothing new starts
        release.set()
    assert not errors
    # Each task took its share of the queue (40 records, 4 tasks) and ran its first record.
    assert sorted(started) == sorted(finished) and len(started) == 4 and 0 in started
    assert executor.stats().handled == 4
    assert consumer.committed_offsets() == {TP0: 1}  # the watermark: offset 1 never ran
    assert consumer.closed and not executor_threads()


def test_a_failing_async_handler_under_run_is_retried_called_back_then_stops_the_run() -> None:
    """Retries on the loop, then the failure policy: "callback" accepts the record and the run
    goes on past it; "stop" raises HandlerError from run(), committed up to the record."""
    executor_threads = Threads()
    failures: list[tuple[int, str, int]] = []

    seen_threads: set[str] = set()

    async def flaky(record: Any) -> None:
        seen_threads.update(executor_threads())  # no worker thread, while records run
        await asyncio.sleep(0)
        if record.offset == 7:
            raise ValueError(f"bad {record.offset}")

    consumer = FakeConsumer({TP0: keyed(20), TP1: keyed(10)})
    consumer.subscribe(["t"])
    executor = ShardedExecutor(
        consumer, flaky, shards=4, failure_policy="callback", max_attempts=3,
        retry_backoff_ms=1, commit_interval_ms=0,
        on_failure=lambda record, error, attempts: failures.append(
            (record.offset, str(error), attempts)),
    )
    with running(executor) as errors:
        wait_for(lambda: consumer.committed_offsets() == {TP0: 20, TP1: 10}, _WAIT_S)
    assert not errors
    assert sorted(failures) == [(7, "bad 7", 3), (7, "bad 7", 3)]  # offset 7 of each
    stats = executor.stats()
    assert (stats.called_back, stats.retries, stats.handled) == (2, 4, 28)

    consumer = FakeConsumer({TP0: keyed(20)})
    consumer.subscribe(["t"])
    executor = ShardedExecutor(consumer, flaky, shards=4, max_attempts=1, commit_interval_ms=0)
    thread_errors: list[BaseException] = []
    thread = run_in_thread(executor, thread_errors)
    thread.join(_WAIT_S)
    assert not thread.is_alive()
    assert len(thread_errors) == 1 and isinstance(thread_errors[0], HandlerError)
    assert thread_errors[0].offset == 7
    assert consumer.committed_offsets()[TP0] <= 7
    assert not executor_threads()
    assert seen_threads == {"priority-kafka-event-loop"}


def test_the_executors_loop_waits_to_the_microsecond_and_wakes_on_io_at_once() -> None:
    """A timer 0.3 ms away is not rounded up to epoll's millisecond (it fires no earlier than
    due), and a readable socket ends a long wait at once."""
    loop = new_event_loop()
    reader, writer = socket.socketpair()
    try:
        selector = loop._selector  # type: ignore[attr-defined]
        began = time.monotonic()
        assert selector.select(0.0003) == []
        assert time.monotonic() - began >= 0.0003
        key = selector.register(reader, selectors.EVENT_READ)
        writer.send(b"x")
        began = time.monotonic()
        events = selector.select(30.0)
        assert [k.fileobj for k, _ in events] == [key.fileobj]
        assert time.monotonic() - began < 15.0
    finally:
        reader.close()
        writer.close()
        loop.close()


def test_with_budgets_an_async_handler_keeps_the_worker_threads() -> None:
    """A record waits for its tokens by blocking, which the loop must not: with budgets the
    worker threads take the records and hand each to the loop, as before."""
    executor_threads = Threads()
    consumer = FakeConsumer({TP0: keyed(30)})
    consumer.subscribe(["t"])
    during: set[str] = set()

    async def handler(record: Any) -> None:
        during.update(executor_threads())
        await asyncio.sleep(0)

    executor = ShardedExecutor(consumer, handler, shards=2, commit_interval_ms=0,
                               budgets=Budgets({"api": 1000}))
    with running(executor) as errors:
        wait_for(lambda: consumer.committed_offsets() == {TP0: 30}, _WAIT_S)
    assert not errors
    assert {"priority-kafka-event-loop", "priority-kafka-worker-0"} <= during
