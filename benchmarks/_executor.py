"""What the executor benchmarks share: a handler meter and running an executor to a count.

Times are measured inside the handlers: ``processing_s`` runs from the first handler start to
the last handler end (the executor's steady work), ``wall_s`` from ``run()`` to the last
handler end (adds the consumer group join and the first fetch).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks._consumers import raw_consumer
from priority_kafka.executor import ShardedExecutor


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
    errors: list[BaseException] = []

    def target() -> None:
        try:
            executor.run()
        except BaseException as exc:  # reported below, on the benchmark's thread
            errors.append(exc)

    thread = threading.Thread(target=target, name="benchmark-executor", daemon=True)
    thread.start()
    finished = meter.done.wait(timeout_s)
    executor.stop()
    thread.join(60)
    if errors:
        raise errors[0]
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
