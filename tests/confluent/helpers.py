"""Shared by the confluent-kafka tests: topics, producing, consumers, polling until a condition."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from priority_kafka.confluent import PriorityConsumer, PriorityProducer


def produce(servers: str, topic: str, counts: dict[int, int], partitions: int = 1) -> None:
    """Send counts[level] messages to each level, values b'<level>:<i>', spread over partitions."""
    producer = PriorityProducer({"bootstrap.servers": servers, "max.priority": 3, "linger.ms": 5})
    for level, count in counts.items():
        for i in range(count):
            producer.produce(topic, f"{level}:{i}".encode(), priority=level,
                             partition=i % partitions)
    assert producer.flush(30) == 0


def consumer(servers: str, group: str, **configs: Any) -> PriorityConsumer:
    return PriorityConsumer({
        "bootstrap.servers": servers, "group.id": group, "max.priority": 3,
        "auto.offset.reset": "earliest", **configs,
    })


def level_of(message: Any) -> int:
    return int(message.topic().rsplit("-", 1)[1])


def counts(messages: Iterable[Any]) -> Counter[int]:
    return Counter(level_of(m) for m in messages)


def is_highest_first(messages: list[Any]) -> bool:
    levels = [level_of(m) for m in messages]
    return levels == sorted(levels, reverse=True)


def consume_until(
    c: Any, predicate: Callable[[list[Any]], bool], num: int = 50, timeout_s: float = 30.0
) -> list[Any]:
    """Consume batches until ``predicate(batch)`` holds for one; return everything consumed."""
    seen: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = c.consume(num, 0.5)
        seen += batch
        if predicate(batch):
            return seen
    raise AssertionError(f"condition not met in {timeout_s} s ({len(seen)} messages)")


def consume_levels(c: Any, levels: set[int], timeout_s: float = 30.0) -> list[Any]:
    """Consume until messages of every level in ``levels`` came (over any number of batches:
    a level fetched first may burst alone); return everything consumed."""
    seen_levels: set[int] = set()

    def every_level(batch: list[Any]) -> bool:
        seen_levels.update(counts(batch))
        return levels <= seen_levels

    return consume_until(c, every_level, timeout_s=timeout_s)


def join(c: Any, partitions: int = 3, timeout_s: float = 30.0) -> None:
    """Consume (nothing must come) until ``partitions`` partitions are assigned over the levels."""
    deadline = time.monotonic() + timeout_s
    while len(c.assignment()) < partitions:
        assert time.monotonic() < deadline, f"{c.assignment()} after {timeout_s} s"
        assert c.consume(10, 0.2) == []


def wait_fetched(c: Any, partitions: list[Any], high: int, timeout_s: float = 30.0) -> None:
    """Wait until each partition's first fetch has arrived (its cached high watermark is
    ``high``) and its messages are queued: from then on its whole backlog waits in librdkafka's
    queue."""
    deadline = time.monotonic() + timeout_s
    while any(c.get_watermark_offsets(tp, cached=True)[1] != high for tp in partitions):
        assert time.monotonic() < deadline, "first fetches did not arrive"
        time.sleep(0.01)
    # The watermark is cached as the fetch response is parsed, a moment before its messages
    # reach the consumer's queue (a level then looked empty for one round, under load).
    time.sleep(0.5)


def run_in_thread(executor: Any, failures: list[BaseException]) -> threading.Thread:
    """Start ``executor.run()`` in a thread; what it raises is appended to ``failures``."""
    def run() -> None:
        try:
            executor.run()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread
