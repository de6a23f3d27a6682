"""priority_kafka.aio: the aiokafka PriorityConsumer and PriorityProducer against the real broker.

Each test runs its coroutine with ``asyncio.run`` (no pytest plugin): the consumer and producer
are built inside the running loop, as aiokafka's are.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest
from aiokafka import ConsumerRebalanceListener, TopicPartition
from kafka.admin import KafkaAdminClient

from priority_kafka import ConfigError, MissingTopicsError, create_priority_topics
from priority_kafka.aio import PriorityConsumer, PriorityProducer
from tests.test_executor import create_topic

pytestmark = pytest.mark.integration


def topics_of(bootstrap_servers: str) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


async def fill(bootstrap_servers: str, topic: str, counts: dict[int, int]) -> None:
    """``counts[level]`` records in each level topic, values ``<level>:<n>``."""
    async with PriorityProducer(
        bootstrap_servers=bootstrap_servers, max_priority=len(counts), linger_ms=5
    ) as producer:
        for level, count in counts.items():
            for n in range(count):
                await producer.send(topic, f"{level}:{n}".encode(), key=b"k", priority=level)
        await producer.flush()


def consumer_of(bootstrap_servers: str, topic: str, levels: int, **settings: Any) -> Any:
    """A PriorityConsumer of ``topic``'s ``levels`` levels in a fresh group, from the start."""
    return PriorityConsumer(
        topic, bootstrap_servers=bootstrap_servers, group_id=f"{topic}-g", max_priority=levels,
        auto_offset_reset="earliest", **settings,
    )


async def drain(consumer: PriorityConsumer, total: int, **getmany: Any) -> list[dict[Any, Any]]:
    """getmany() batches until ``total`` records came (at most 60 s)."""
    batches, seen = [], 0
    async with asyncio.timeout(60):
        while seen < total:
            batch = await consumer.getmany(timeout_ms=200, **getmany)
            if batch:
                batches.append(batch)
                seen += sum(map(len, batch.values()))
    return batches


def test_getmany_returns_every_record_highest_level_first_within_its_limits(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """Each batch holds at most ``max_records``, its partitions highest level first, each
    partition's records in offset order; every record comes once; once every level has a
    backlog, a full round gives each level its reserved share."""
    topic = unique_name("orders")
    create_priority_topics(bootstrap_servers, topic, 3)

    async def main() -> None:
        await fill(bootstrap_servers, topic, {0: 40, 1: 40, 2: 40})
        async with consumer_of(bootstrap_servers, topic, 3, max_poll_records=10) as consumer:
            assert consumer.reserved_quotas == {2: 7, 1: 2, 0: 1}
            batches = await drain(consumer, 120, max_records=10)
            values: dict[int, list[bytes]] = collections.defaultdict(list)
            for batch in batches:
                levels = [consumer.priority_of(tp.topic) for tp in batch]
                assert levels == sorted(levels, reverse=True), levels
                assert sum(map(len, batch.values())) <= 10
                for tp, records in batch.items():
                    values[consumer.priority_of(tp.topic)] += [r.value for r in records]
            for level in range(3):
                assert values[level] == [f"{level}:{n}".encode() for n in range(40)]
            # A round with every level's records fetched is the reserved split exactly. When
            # each level's fetch comes back is the broker's business: read again from the
            # start until one has (any other split fails the test after 30 s).
            split: dict[int, int] = {}
            async with asyncio.timeout(30):
                while split != {2: 7, 1: 2, 0: 1}:
                    await consumer.seek_to_beginning()
                    await asyncio.sleep(0.3)  # time for the fetches; not a timing assertion
                    batch = await consumer.getmany(max_records=10)
                    split = {consumer.priority_of(tp.topic): len(r) for tp, r in batch.items()}
                    assert split.get(2, 0) <= 7 + 3 and sum(split.values()) <= 10, split

    asyncio.run(main())


def test_a_lone_busy_level_bursts_into_the_idle_levels_share(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """Only the lowest level has records: after ``min_poll_window_maxout_threshold`` maxed-out
    rounds it borrows what the idle levels leave unused, so rounds return more than its
    reserved share (as on the other families)."""
    topic = unique_name("orders")
    create_priority_topics(bootstrap_servers, topic, 3)

    async def main() -> None:
        await fill(bootstrap_servers, topic, {0: 200, 1: 0, 2: 0})
        async with consumer_of(bootstrap_servers, topic, 3, max_poll_records=10) as consumer:
            batches = await drain(consumer, 200)
            sizes = [sum(map(len, batch.values())) for batch in batches]
            assert consumer.burst.burst_counts[0] > 0
            assert max(sizes) == 10 and sizes.count(10) > 5, sizes
            assert consumer.level_figures[0].records_returned == 200

    asyncio.run(main())


def test_a_wait_wakes_on_a_lower_levels_records_and_its_cancelled_waits_take_none(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """getmany() with nothing at hand waits on every level at once: records coming to level 0
    alone end a 60 s wait at once (a wait on the highest level alone would sit it out), and the
    other levels' waits, cancelled then, took nothing: every record comes once, in order, and
    the commit lands after the last."""
    topic = unique_name("orders")
    create_priority_topics(bootstrap_servers, topic, 3)

    async def main() -> None:
        async with consumer_of(
            bootstrap_servers, topic, 3, enable_auto_commit=False
        ) as consumer:
            assert await consumer.getmany(timeout_ms=500) == {}
            waiting = asyncio.ensure_future(consumer.getmany(timeout_ms=60_000))
            await fill(bootstrap_servers, topic, {0: 5, 1: 0, 2: 0})
            async with asyncio.timeout(30):
                first = await waiting
            assert first, "the wait ended without records"
            seen = [r.value for records in first.values() for r in records]
            for batch in await drain(consumer, 5 - len(seen)):
                seen += [r.value for records in batch.values() for r in records]
            assert seen == [f"0:{n}".encode() for n in range(5)]
            await consumer.commit()
            assert await consumer.committed(TopicPartition(f"{topic}-0", 0)) == 5

    asyncio.run(main())


def test_start_names_a_level_the_broker_has_beyond_max_priority_and_a_missing_one(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """A level topic at or above ``max_priority`` raises ConfigError naming it; a missing
    level MissingTopicsError naming it; and no topic is created by looking."""
    extra, missing = unique_name("extra"), unique_name("missing")
    create_priority_topics(bootstrap_servers, extra, 4)

    async def main() -> None:
        with pytest.raises(ConfigError, match=rf"{extra}-3 exists but max_priority=3"):
            await PriorityConsumer(
                extra, bootstrap_servers=bootstrap_servers, group_id="g", max_priority=3,
            ).start()
        consumer = PriorityConsumer(
            bootstrap_servers=bootstrap_servers, group_id="g", max_priority=2
        )
        await consumer.start()
        try:
            consumer.subscribe([missing])
            with pytest.raises(MissingTopicsError, match=rf"{missing}-0, {missing}-1"):
                await consumer.getmany(timeout_ms=100)
        finally:
            await consumer.stop()

    asyncio.run(main())
    assert not {name for name in topics_of(bootstrap_servers) if name.startswith(missing)}


def test_commit_seek_pause_and_the_listener_work_per_level(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """``commit()`` stores what was returned (a new member of the group starts after it);
    ``seek`` reads again; a paused partition returns nothing until resumed; the listener
    hears each level's assignment; ``async for`` and ``getone`` serve records one by one."""
    topic, group = unique_name("orders"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, 2)
    high, low = TopicPartition(f"{topic}-1", 0), TopicPartition(f"{topic}-0", 0)

    class Heard(ConsumerRebalanceListener):
        def __init__(self) -> None:
            self.assigned: set[Any] = set()

        async def on_partitions_revoked(self, revoked: Any) -> None:
            return None

        async def on_partitions_assigned(self, assigned: Any) -> None:
            self.assigned |= set(assigned)

    async def main() -> None:
        await fill(bootstrap_servers, topic, {0: 5, 1: 5})
        heard = Heard()
        settings = {"bootstrap_servers": bootstrap_servers, "group_id": group,
                    "max_priority": 2, "auto_offset_reset": "earliest",
                    "enable_auto_commit": False}
        async with PriorityConsumer(**settings) as consumer:
            consumer.subscribe([topic], listener=heard)
            first = await consumer.getone()
            assert heard.assigned == {high, low}
            consumer.pause(high)
            assert consumer.paused() == {high}
            batch = await consumer.getmany(timeout_ms=5000)
            assert batch and set(batch) == {low}
            consumer.resume(high)
            consumer.seek(low, 3)
            got: dict[Any, list[int]] = collections.defaultdict(list)
            async with asyncio.timeout(60):
                while got[high][-1:] != [4] or got[low][-1:] != [4]:
                    for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                        got[tp] += [r.offset for r in records]
            assert got[high] == list(range(first.offset + 1 if first.topic == high.topic else 0, 5))
            assert got[low] == [3, 4]
            await consumer.commit()
            assert await consumer.committed(high) == 5 and await consumer.committed(low) == 5
            await consumer.seek_to_beginning(low)
            assert (await consumer.getone()).offset == 0
            await consumer.commit({low: 2})
        await fill(bootstrap_servers, topic, {0: 1, 1: 1})
        async with PriorityConsumer(topic, **settings) as again:
            seen = []
            async for record in again:
                seen.append((record.topic, record.offset))
                if len(seen) == 5:
                    break
            assert seen == [(high.topic, 5), (low.topic, 2), (low.topic, 3), (low.topic, 4),
                            (low.topic, 5)]

    asyncio.run(main())


def test_the_producer_checks_levels_and_creates_no_topic(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """``send_and_wait(priority=p)`` lands in ``<topic>-<p>``; a priority outside the levels
    is refused naming it, a level topic the broker lacks MissingTopicsError naming the levels
    it has; neither sends or creates anything."""
    topic, missing = unique_name("orders"), unique_name("none")
    create_priority_topics(bootstrap_servers, topic, 2)

    async def main() -> None:
        async with PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=3) as p:
            sent = await p.send_and_wait(topic, b"v", priority=1)
            assert (sent.topic, sent.offset) == (f"{topic}-1", 0)
            with pytest.raises(MissingTopicsError, match=rf"{topic}-2 does not exist"):
                await p.partitions_for(topic)
            with pytest.raises(ConfigError, match=r"priority"):
                await p.send(topic, b"v", priority=3)
            with pytest.raises(MissingTopicsError, match=rf"{topic}-2 does not exist .*"
                               rf"has levels {topic}-0..{topic}-1"):
                await p.send(topic, b"v", priority=2)
            with pytest.raises(MissingTopicsError, match="has no level topics"):
                await p.send(missing, b"v")

    asyncio.run(main())
    assert not {name for name in topics_of(bootstrap_servers) if name.startswith(missing)}
    assert f"{topic}-2" not in topics_of(bootstrap_servers)


def test_a_plain_topic_of_one_level(bootstrap_servers: str, unique_name: Any) -> None:
    """``max_priority=1`` reads ``<topic>-0`` as a plain consumer would."""
    topic = unique_name("plain")
    create_topic(bootstrap_servers, f"{topic}-0")

    async def main() -> None:
        await fill(bootstrap_servers, topic, {0: 3})
        async with consumer_of(bootstrap_servers, topic, 1) as consumer:
            batches = await drain(consumer, 3)
            assert [r.value for b in batches for rs in b.values() for r in rs] == [
                b"0:0", b"0:1", b"0:2"]

    asyncio.run(main())


@pytest.mark.parametrize(
    ("given", "partition_bytes", "fetch_bytes"),
    [
        ({}, 8 * 2**20 // 3, 8 * 2**20 // 3),  # 3 MiB a partition, within the level's share
        ({"fetch_buffer_bytes": 64 * 2**20}, 3 * 2**20, 64 * 2**20 // 3),
        ({"max.partition.fetch.bytes": "12345"}, 12345, 8 * 2**20 // 3),  # given: kept
        ({"fetch_max_bytes": 2**20}, 2**20, 2**20),
    ],
)
def test_each_level_fetches_up_to_a_mib_per_level_of_a_partition(
    given: dict[str, Any], partition_bytes: int, fetch_bytes: int
) -> None:
    """A level's max_partition_fetch_bytes is aiokafka's 1 MiB once per level, within its
    fetch_max_bytes (its share of fetch_buffer_bytes), unless given: one consumer of the three
    topics would fetch that much of them in one request."""

    async def main() -> None:
        consumer = PriorityConsumer("t", max_priority=3, bootstrap_servers="localhost:1", **given)
        for level in consumer.level_consumers.values():
            assert level._max_partition_fetch_bytes == partition_bytes
            assert level._fetch_max_bytes == fetch_bytes
        await consumer.stop()

    asyncio.run(main())
