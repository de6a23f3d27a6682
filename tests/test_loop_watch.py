"""An async handler that blocks its event loop is named once, with the record and the time it
held the loop (priority_kafka._workers._loop_watch)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from priority_kafka import ShardedExecutor
from priority_kafka._structs import TopicPartition
from priority_kafka._workers import LoopWatch
from tests.test_executor import (
    consumer_for,
    loaded_topic,
    note_sequence,
    run_until_recorded,
    running,  # noqa: F401 (a fixture)
)

WARNING = "held the event loop for"


class Record:
    def __init__(self, offset: int) -> None:
        self.topic, self.partition, self.offset = "orders-2", 0, offset


def test_the_first_step_that_blocks_is_named_once_with_its_record_and_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler that awaits is not named; one that sleeps 0.25 s between awaits is, once,
    with its record and at least the time it slept; a second blocking record is not; what
    the handler returns and raises comes through."""
    watch = LoopWatch(threshold_s=0.1)

    async def polite(record: Record) -> str:
        await asyncio.sleep(0.2)  # waits, holding nothing
        return f"ok {record.offset}"

    async def blocking(record: Record) -> str:
        await asyncio.sleep(0)
        time.sleep(0.25)
        await asyncio.sleep(0)
        return f"blocked {record.offset}"

    async def failing(record: Record) -> None:
        raise ValueError("bad record")

    async def main() -> None:
        assert await watch.watched(polite(Record(1)), Record(1)) == "ok 1"
        assert watch.warned is None
        assert await watch.watched(blocking(Record(7)), Record(7)) == "blocked 7"
        assert await watch.watched(blocking(Record(8)), Record(8)) == "blocked 8"
        with pytest.raises(ValueError, match="bad record"):
            await watch.watched(failing(Record(9)), Record(9))

    with caplog.at_level(logging.WARNING, "priority_kafka.executor"):
        asyncio.run(main())
    named = [r.getMessage() for r in caplog.records if WARNING in r.getMessage()]
    assert len(named) == 1, named
    assert "orders-2[0]@7" in named[0]
    assert watch.warned is not None and watch.warned[:3] == ("orders-2", 0, 7)
    assert watch.warned[3] >= 0.25


def test_a_cancelled_handler_is_cancelled_through_the_watch() -> None:
    """Cancelling the task awaiting a watched handler cancels the handler itself."""
    watch = LoopWatch()
    reached = []

    async def slow(record: Record) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            reached.append(record.offset)
            raise

    async def main() -> None:
        task = asyncio.ensure_future(watch.watched(slow(Record(3)), Record(3)))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert reached == [3]


@pytest.mark.integration
def test_the_executor_names_an_async_handler_that_blocks_its_loop(
    bootstrap_servers: str, unique_name: Callable[[str], str],
    running: Any,  # noqa: F811 (the imported fixture)
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Under the executor, one record whose handler sleeps 0.3 s without awaiting is named
    (its topic, partition and offset, and the time), once; every record is still handled."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "blocking", 200, keys=4)
    seen: dict[str, list[int]] = defaultdict(list)
    blocked: list[Any] = []

    async def handler(record: Any) -> None:
        if record.offset == 50 and not blocked:
            blocked.append(TopicPartition(record.topic, record.partition))
            time.sleep(0.3)
        await asyncio.sleep(0)
        note_sequence(seen, record)

    executor = ShardedExecutor(
        consumer_for(bootstrap_servers, topic, group), handler, shards=4, async_concurrency=8,
    )
    with caplog.at_level(logging.WARNING, "priority_kafka.executor"):
        run_until_recorded(running, executor, seen, 200, 60)
    named = [r.getMessage() for r in caplog.records if WARNING in r.getMessage()]
    assert len(named) == 1, named
    (tp,) = blocked
    assert f"{tp.topic}[{tp.partition}]@50" in named[0]
    assert all(values == list(range(len(values))) for values in seen.values())
