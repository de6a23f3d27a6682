"""ShardedExecutor.run_async() / ``async with executor:`` on the caller's loop, real broker.

Each test runs its coroutine with ``asyncio.run``; the aio PriorityConsumer is built and
started inside that loop. Waits are on events (the handlers' own), never on sleeps.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Any

import pytest

from priority_kafka import create_priority_topics
from priority_kafka.aio import PriorityConsumer
from priority_kafka.budgets import Budgets
from priority_kafka.errors import ConfigError, HandlerError, IllegalStateError
from priority_kafka.executor import ShardedExecutor
from priority_kafka.naming import level_group_id
from tests.test_executor import committed, consumer_for, create_topic, produce, produce_levels

pytestmark = pytest.mark.integration

#: Longest any wait of these tests may take (a loaded machine: load 5-10).
_WAIT_S = 90


async def started(bootstrap: str, topic: str, group: str, **settings: Any) -> PriorityConsumer:
    """An aio PriorityConsumer of ``topic``'s three levels, from the start, started here."""
    consumer = PriorityConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, max_priority=3,
        auto_offset_reset="earliest", enable_auto_commit=False, **settings,
    )
    await consumer.start()
    return consumer


def level_offsets(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    """The committed offset of each level's partition 0 (level ``L`` commits in group
    ``group-L``)."""
    found = {}
    for level in range(3):
        for tp, offset in committed(bootstrap, level_group_id(group, level)).items():
            if tp.topic == f"{topic}-{level}":
                found[level] = offset
    return found


def test_async_handlers_run_on_the_callers_loop_in_key_order_and_everything_is_committed(
    bootstrap_servers: str, unique_name: Any
) -> None:
    topic, group = unique_name("async-order"), unique_name("async-order-g")
    create_priority_topics(bootstrap_servers, topic, 3)
    counts = {0: 300, 1: 200, 2: 100}
    produce_levels(bootstrap_servers, topic, counts, keys=20)
    total = sum(counts.values())
    seen: dict[tuple[int, bytes], list[int]] = defaultdict(list)
    running: dict[bytes, int] = defaultdict(int)
    threads: set[int] = set()
    most = 0
    now_running = 0

    async def main() -> None:
        nonlocal most, now_running
        loop_thread = threading.get_ident()
        all_done = asyncio.Event()
        consumer = await started(bootstrap_servers, topic, group)
        handled = 0

        async def handler(record: Any) -> None:
            nonlocal handled, most, now_running
            threads.add(threading.get_ident())
            running[record.key + record.topic.encode()] += 1
            now_running += 1
            most = max(most, now_running)
            assert running[record.key + record.topic.encode()] == 1, "two records of a key"
            await asyncio.sleep(0.002)
            level, _, seq = record.value.decode().split(":")
            seen[(int(level), record.key)].append(int(seq))
            running[record.key + record.topic.encode()] -= 1
            now_running -= 1
            handled += 1
            if handled == total:
                all_done.set()

        executor = ShardedExecutor(consumer, handler, async_concurrency=50)
        async with executor:
            await asyncio.wait_for(all_done.wait(), _WAIT_S)
        assert threads == {loop_thread}

    asyncio.run(main())
    for (level, _key), seqs in seen.items():
        assert seqs == sorted(seqs), f"level {level}: out of key order"
    assert sum(map(len, seen.values())) == sum(counts.values())
    assert most > 1, "records of different keys never ran at once"
    assert level_offsets(bootstrap_servers, topic, group) == counts


def one_level_topic(bootstrap: str, unique_name: Any, name: str, count: int, keys: int
                    ) -> tuple[str, str]:
    """A plain (one-level) topic ``<topic>-0`` of ``count`` records over ``keys`` keys (the
    record at offset ``n`` has key ``n % keys``), and a fresh group."""
    topic, group = unique_name(name), unique_name(f"{name}-g")
    create_topic(bootstrap, f"{topic}-0")
    if count:
        produce(bootstrap, f"{topic}-0", count, keys=keys)
    return topic, group


async def one_level_consumer(
    bootstrap: str, topic: str, group: str, **settings: Any
) -> PriorityConsumer:
    """An aio PriorityConsumer of ``topic``'s one level, from the start, started here."""
    consumer = PriorityConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, max_priority=1,
        auto_offset_reset="earliest", enable_auto_commit=False, **settings,
    )
    await consumer.start()
    return consumer


def test_a_commit_never_passes_a_record_still_running_and_reaches_the_end_once_it_ends(
    bootstrap_servers: str, unique_name: Any
) -> None:
    topic, group = one_level_topic(bootstrap_servers, unique_name, "async-held", 200, 10)
    held_offset = 37
    # Key order: the later records of the held record's key wait for it (key = offset % 10).
    others = {offset for offset in range(200) if offset % 10 != 7 or offset < held_offset}

    async def main() -> list[int]:
        release, held, rest_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
        all_done = asyncio.Event()
        done = set()
        consumer = await one_level_consumer(bootstrap_servers, topic, group)

        async def handler(record: Any) -> None:
            if record.offset == held_offset:
                held.set()
                await release.wait()
            done.add(record.offset)
            if done == others:
                rest_done.set()
            if len(done) == 200:
                all_done.set()

        seen = []
        executor = ShardedExecutor(consumer, handler, async_concurrency=20, commit_interval_ms=0)
        async with executor:
            await asyncio.wait_for(held.wait(), _WAIT_S)
            await asyncio.wait_for(rest_done.wait(), _WAIT_S)
            # Every record but the held one is done: the commits reach it, never past it.
            while (offset := await _committed(bootstrap_servers, group, topic)) != held_offset:
                assert offset is None or offset < held_offset
                seen.append(offset)
                await asyncio.sleep(0.05)
            seen.append(offset)
            release.set()
            # The held key's later records run once it ends; leaving before they ran would
            # stop with them queued (a stop drains what runs, not what waits in a lane).
            await asyncio.wait_for(all_done.wait(), _WAIT_S)
        seen.append(await _committed(bootstrap_servers, group, topic))
        return seen

    offsets = asyncio.run(main())
    assert offsets[-2:] == [held_offset, 200]


async def _committed(bootstrap: str, group: str, topic: str) -> int | None:
    found = await asyncio.to_thread(committed, bootstrap, f"{group}-0")
    return next((offset for tp, offset in found.items() if tp.topic == f"{topic}-0"), None)


def test_a_failing_async_handler_stops_the_run_with_the_commit_at_its_record(
    bootstrap_servers: str, unique_name: Any
) -> None:
    topic, group = one_level_topic(bootstrap_servers, unique_name, "async-fail", 100, 5)
    attempts = []

    async def main() -> None:
        consumer = await one_level_consumer(bootstrap_servers, topic, group)

        async def handler(record: Any) -> None:
            await asyncio.sleep(0)
            if record.offset == 42:
                attempts.append(record.offset)
                raise ValueError("bad record 42")

        executor = ShardedExecutor(
            consumer, handler, async_concurrency=10, max_attempts=3, retry_backoff_ms=1,
        )
        with pytest.raises(HandlerError, match="42") as raised:
            await asyncio.wait_for(executor.run_async(), _WAIT_S)
        assert isinstance(raised.value.__cause__, ValueError)
        assert executor.stats().retries == 2

    asyncio.run(main())
    assert attempts == [42, 42, 42]
    assert list(committed(bootstrap_servers, f"{group}-0").values()) == [42]


def test_cancelling_run_async_drains_commits_closes_and_raises_cancelled(
    bootstrap_servers: str, unique_name: Any
) -> None:
    topic, group = one_level_topic(bootstrap_servers, unique_name, "async-cancel", 2000, 50)
    entered, finished = [], []

    async def main() -> None:
        some_done = asyncio.Event()
        consumer = await one_level_consumer(bootstrap_servers, topic, group)

        async def handler(record: Any) -> None:
            entered.append(record.offset)
            await asyncio.sleep(0.01)
            finished.append(record.offset)
            if len(finished) >= 300:
                some_done.set()

        executor = ShardedExecutor(consumer, handler, async_concurrency=40)
        task = asyncio.create_task(executor.run_async())
        await asyncio.wait_for(some_done.wait(), _WAIT_S)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert executor.stats().running == 0
        with pytest.raises(IllegalStateError, match="closed"):
            await executor.run_async()

    asyncio.run(main())
    assert sorted(entered) == sorted(finished), "a running handler was not drained"
    assert len(finished) < 2000
    offset = next(iter(committed(bootstrap_servers, f"{group}-0").values()))
    # The commit on cancellation is the watermark of what was done: the first record not done.
    assert offset == min(set(range(2000)) - set(finished))


def test_plain_def_handlers_run_on_the_worker_threads_under_run_async(
    bootstrap_servers: str, unique_name: Any
) -> None:
    topic, group = one_level_topic(bootstrap_servers, unique_name, "async-sync", 300, 10)
    threads: set[int] = set()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        all_done = asyncio.Event()
        done = []
        consumer = await one_level_consumer(bootstrap_servers, topic, group)

        def handler(record: Any) -> None:
            threads.add(threading.get_ident())
            done.append(record.offset)
            if len(done) == 300:
                loop.call_soon_threadsafe(all_done.set)

        async with ShardedExecutor(consumer, handler, shards=4):
            await asyncio.wait_for(all_done.wait(), _WAIT_S)
        assert threading.get_ident() not in threads

    asyncio.run(main())
    assert list(committed(bootstrap_servers, f"{group}-0").values()) == [300]


def test_bad_use_of_run_async_is_named(bootstrap_servers: str, unique_name: Any) -> None:
    topic, group = one_level_topic(bootstrap_servers, unique_name, "async-bad", 0, 0)

    async def handler(record: Any) -> None:
        return None

    with pytest.raises(ConfigError, match="'async_concurrency' must be at least 1"):
        ShardedExecutor(consumer_for(bootstrap_servers, None, group), handler,
                        async_concurrency=0)

    async def main() -> None:
        sync_consumer = consumer_for(bootstrap_servers, f"{topic}-0", group)
        try:
            with pytest.raises(IllegalStateError, match=r"KafkaConsumer.*asyncio.to_thread"):
                await ShardedExecutor(sync_consumer, handler).run_async()
        finally:
            sync_consumer.close()
        consumer = await one_level_consumer(bootstrap_servers, topic, group)
        executor = ShardedExecutor(consumer, handler)
        async with executor:
            with pytest.raises(IllegalStateError, match=r"once per executor.*running"):
                await executor.run_async()
            with pytest.raises(IllegalStateError, match=r"once per executor.*running"):
                await asyncio.to_thread(executor.run, False)
        with pytest.raises(IllegalStateError, match=r"once per executor.*closed"):
            await executor.run_async()
        other = await one_level_consumer(bootstrap_servers, topic, group)
        try:
            never_built = ShardedExecutor(
                other, handler, transactional_producer=lambda: pytest.fail("built")
            )
            with pytest.raises(IllegalStateError, match="does not run exactly-once"):
                await never_built.run_async()
            budgeted = ShardedExecutor(other, handler, budgets=Budgets({"sms": 10}))
            with pytest.raises(IllegalStateError, match="budgets needs a plain def handler"):
                async with budgeted:
                    pytest.fail("entered")
        finally:
            await other.stop()

    asyncio.run(main())

    # A consumer on a loop of its own (built for a synchronous caller) is not this loop's.
    from priority_kafka.aio import _family

    own = _family.consumer({"bootstrap_servers": bootstrap_servers, "group_id": group})

    async def other_loop() -> None:
        with pytest.raises(IllegalStateError, match="another event loop"):
            await ShardedExecutor(own, handler).run_async()

    try:
        asyncio.run(other_loop())
    finally:
        from priority_kafka.executor._clients import as_client

        as_client(own).close()


def test_failed_async_records_are_dead_lettered_and_committed_past(
    bootstrap_servers: str, unique_name: Any
) -> None:
    topic, group = one_level_topic(bootstrap_servers, unique_name, "async-dlq", 100, 5)
    dlq = unique_name("async-dlq-letters")
    create_topic(bootstrap_servers, dlq)
    handled = []

    async def main() -> None:
        all_done = asyncio.Event()
        consumer = await one_level_consumer(bootstrap_servers, topic, group)

        async def handler(record: Any) -> None:
            await asyncio.sleep(0)
            if record.offset % 25 == 7:
                raise KeyError(record.offset)
            handled.append(record.offset)

        executor = ShardedExecutor(
            consumer, handler, async_concurrency=10, max_attempts=2, retry_backoff_ms=1,
            failure_policy="dead_letter", dead_letter_topic=dlq,
        )

        async def watch() -> None:
            while executor.stats().get("dead_lettered", 0) + len(handled) < 100:
                await asyncio.sleep(0.01)
            all_done.set()

        async with executor:
            watcher = asyncio.create_task(watch())
            await asyncio.wait_for(all_done.wait(), _WAIT_S)
            await watcher
        assert executor.stats().get("dead_lettered") == 4
        assert executor.stats().retries == 4

    asyncio.run(main())
    assert len(handled) == 96
    assert list(committed(bootstrap_servers, f"{group}-0").values()) == [100]
    reader = consumer_for(bootstrap_servers, dlq, unique_name("reader"))
    try:
        letters: list[Any] = []
        while len(letters) < 4:
            for records in reader.poll(timeout_ms=500).values():
                letters.extend(records)
    finally:
        reader.close()
    assert sorted(int(dict(r.headers)["dead_letter.offset"]) for r in letters) == [7, 32, 57, 82]


def test_a_second_member_takes_partitions_over_from_a_running_run_async_without_loss(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """A rebalance while run_async() runs: the revoked partitions' running handlers finish
    (awaited on the loop) and are committed; every record is handled, and the group's commits
    reach the end of both partitions."""
    topic, group = unique_name("async-rebalance"), unique_name("async-rebalance-g")
    create_topic(bootstrap_servers, f"{topic}-0", partitions=2)
    produce(bootstrap_servers, f"{topic}-0", 2000, keys=40, partitions=2)
    seen: dict[str, set[tuple[int, int]]] = {"a": set(), "b": set()}

    async def main() -> None:
        everything = asyncio.Event()
        some_by_a = asyncio.Event()

        def handler_of(name: str) -> Any:
            async def handler(record: Any) -> None:
                # Slow while the second member has handled nothing: the first cannot finish
                # everything before the rebalance.
                await asyncio.sleep(0.002 if seen["b"] else 0.02)
                seen[name].add((record.partition, record.offset))
                if len(seen["a"]) >= 100:
                    some_by_a.set()
                if len(seen["a"] | seen["b"]) == 2000:
                    everything.set()
            return handler

        fast = {"heartbeat_interval_ms": 300}
        first = await one_level_consumer(bootstrap_servers, topic, group, **fast)
        async with ShardedExecutor(first, handler_of("a"), async_concurrency=2) as a:
            await asyncio.wait_for(some_by_a.wait(), _WAIT_S)
            second = await one_level_consumer(bootstrap_servers, topic, group, **fast)
            async with ShardedExecutor(second, handler_of("b"), async_concurrency=20):
                await asyncio.wait_for(everything.wait(), _WAIT_S)
            assert a.stats().commits > 0

    asyncio.run(main())
    assert seen["b"], "the second member never got a partition"
    ends = {tp.partition: n for tp, n in committed(bootstrap_servers, f"{group}-0").items()}
    every = seen["a"] | seen["b"]
    assert ends == {p: 1 + max(o for q, o in every if q == p) for p in (0, 1)}
    assert sum(ends.values()) == 2000


def test_a_handler_raising_cancelled_error_of_its_own_fails_its_record_not_silently(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """Only close() cancels a handler's task; a CancelledError the handler raises itself (an
    inner task cancelled) fails its record, which is not committed past."""
    topic, group = one_level_topic(bootstrap_servers, unique_name, "async-inner", 50, 5)

    async def main() -> None:
        consumer = await one_level_consumer(bootstrap_servers, topic, group)

        async def handler(record: Any) -> None:
            if record.offset == 12:
                raise asyncio.CancelledError
            await asyncio.sleep(0)

        with pytest.raises(HandlerError, match="@12") as raised:
            await asyncio.wait_for(
                ShardedExecutor(consumer, handler, async_concurrency=5).run_async(), _WAIT_S
            )
        assert isinstance(raised.value.__cause__, asyncio.CancelledError)

    asyncio.run(main())
    assert list(committed(bootstrap_servers, f"{group}-0").values()) == [12]
