"""What the executor benchmarks share: the consumer per client, a handler meter, running an
executor to a count, and the confluent / kafka-python comparison.

``--client kafka-python|confluent|both`` (:mod:`benchmarks._clients`) chooses the client family
the executor runs on: :func:`executor_consumer` builds the same consumer on either (a fresh
group, read from the earliest offset, no auto-commit, the same ``max_poll_records``); with
``both`` the two are contenders in the same interleaved run.

Times are measured inside the handlers: ``processing_s`` runs from the first handler start to
the last handler end (the executor's steady work), ``wall_s`` from ``run()`` to the last
handler end (adds the consumer group join and the first fetch).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from benchmarks._clients import check_client
from benchmarks._common import unique
from benchmarks._consumers import MAX_POLL_RECORDS, MAX_PRIORITY, priority_consumer, raw_consumer
from benchmarks.scenarios import Running
from priority_kafka.executor import ShardedExecutor


def executor_consumer(
    client: str,
    bootstrap_servers: str,
    topics: Sequence[str],
    levels: bool = False,
    max_poll_records: int = MAX_POLL_RECORDS,
    overrides: Mapping[str, Any] | None = None,
) -> Any:
    """The executor's consumer on ``client``, subscribed: a fresh group, earliest offsets, no
    auto-commit, at most ``max_poll_records`` a poll, plus the client's own settings
    ``overrides`` (kafka-python or librdkafka names). With ``levels``, a PriorityConsumer over
    the ``MAX_PRIORITY`` levels of the logical topic ``topics[0]``; else a plain consumer of
    ``topics``. confluent's come as the executor's client (``as_client``), subscribed through
    it: a confluent consumer cannot tell the executor what it subscribed to.
    """
    overrides = dict(overrides or {})
    if client == "kafka-python":
        if levels:
            return priority_consumer(
                bootstrap_servers, topics[0], max_poll_records=max_poll_records, **overrides
            )
        return raw_consumer(
            bootstrap_servers, topics, max_poll_records=max_poll_records, **overrides
        )
    check_client(client)
    from confluent_kafka import Consumer

    from priority_kafka.confluent import PriorityConsumer

    try:
        from priority_kafka.confluent.executor import ConfluentClient
        from priority_kafka.executor._clients import as_client
    except ImportError:  # the adapters' names before issue 21, for --code comparisons
        from priority_kafka.confluent.executor import (  # type: ignore[attr-defined,no-redef]
            ClientConsumer as ConfluentClient,
        )
        from priority_kafka.confluent.executor import (  # type: ignore[attr-defined,no-redef]
            PriorityClientConsumer as as_client,
        )

    settings = {
        "bootstrap.servers": bootstrap_servers, "group.id": unique("bench"),
        "auto.offset.reset": "earliest", "enable.auto.commit": False, **overrides,
    }
    if levels:
        client = as_client(PriorityConsumer({
            **settings, "max.priority": MAX_PRIORITY, "max.poll.records": max_poll_records,
        }))
    else:
        # A plain Consumer has no max.poll.records: the adapter takes it.
        client = ConfluentClient(Consumer(settings), max_poll_records)
    client.subscribe(list(topics))
    return client


class Meter:
    """Counts handled records and notes the first start and last end (thread-safe)."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.first_start: float | None = None
        self.last_end = 0.0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def _started(self) -> float:
        now = time.perf_counter()
        if self.first_start is None:
            with self._lock:
                if self.first_start is None:
                    self.first_start = now
        return now

    def _ended(self) -> None:
        now = time.perf_counter()
        with self._lock:
            self.count += 1
            self.last_end = max(self.last_end, now)
            if self.count >= self.expected:
                self.done.set()

    def wrap(self, work: Callable[[Any], Any]) -> Callable[[Any], None]:
        """A handler running ``work(record)`` and counting it."""

        def handler(record: Any) -> None:
            self._started()
            work(record)
            self._ended()

        return handler

    def wrap_async(self, work: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[None]]:
        """An ``async def`` handler awaiting ``work(record)`` and counting it."""

        async def handler(record: Any) -> None:
            self._started()
            await work(record)
            self._ended()

        return handler


def run_executor(executor: ShardedExecutor, meter: Meter, timeout_s: float) -> dict[str, float]:
    """Run ``executor`` on a thread until ``meter`` counted its records; stop it; the times."""
    started = time.perf_counter()
    running = Running(executor)
    finished = meter.done.wait(timeout_s)
    running.stop()
    if running.error is not None:
        raise running.error
    if not finished or meter.first_start is None:
        raise TimeoutError(
            f"handled {meter.count} of {meter.expected} records in {timeout_s:g} s "
            f"(executor stats: {executor.stats()})"
        )
    return {
        "wall_s": meter.last_end - started,
        "processing_s": meter.last_end - meter.first_start,
    }


def plain_loop_rate(servers: str, topic: str, count: int, work: Callable[[Any], Any]) -> float:
    """Records/s of the baseline without an executor: poll, then ``work(record)`` each in turn
    on one thread (what one partition gives a plain consumer), from the first record on."""
    consumer = raw_consumer(servers, [topic])
    try:
        handled, first = 0, None
        while handled < count:
            for records in consumer.poll(timeout_ms=100).values():
                for record in records[: count - handled]:
                    first = first or time.perf_counter()
                    work(record)
                    handled += 1
        assert first is not None
        return count / (time.perf_counter() - first)
    finally:
        consumer.close()
