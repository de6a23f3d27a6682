"""Partitions added to a level after the group's first assignment are read from their start,
on both client families, while the reset policy still governs the group's first start."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewPartitions

from priority_kafka import create_priority_topics
from priority_kafka.added import AddedPartitions
from priority_kafka.families import family as registered
from tests.conftest import names_having

LEVELS = 3
PER_NEW_PARTITION = 50
ADDED = 2  # partitions added to every level's topic (1 -> 3)

Polled = list[tuple[str, int, int]]  # (topic, partition, offset)


def test_only_partitions_beyond_the_first_counts_are_added():
    """The first assignment is the reference; higher partition numbers of a known topic are
    added, a topic first seen later counts as existing at that first sight."""
    added = AddedPartitions()
    counts = {"a": 2}
    assert added.added([("a", 0), ("a", 1)], lambda: counts) == []
    assert added.added([("a", 1), ("a", 2), ("a", 3)], lambda: counts) == [("a", 2), ("a", 3)]
    counts["b"] = 1
    assert added.added([("b", 0), ("b", 1)], lambda: counts) == []  # b: 2 at first sight
    assert added.added([("b", 2), ("a", 0)], lambda: counts) == [("b", 2)]


@pytest.fixture(params=names_having("synchronous"))
def family(request, bootstrap_servers) -> Iterator[tuple[Callable[..., Any], str]]:
    """A factory of a PriorityConsumer (``auto_offset_reset`` latest, metadata refreshed every
    2 s) returning a poll function; and the family's name."""
    closing: list[Any] = []

    def make(topic: str, group: str) -> Callable[[], Polled]:
        if not registered(request.param).librdkafka:
            from priority_kafka import PriorityConsumer

            c = PriorityConsumer(topic, bootstrap_servers=bootstrap_servers, group_id=group,
                                 max_priority=LEVELS, auto_offset_reset="latest",
                                 metadata_max_age_ms=2000)
            closing.append(c)
            return lambda: [(tp.topic, tp.partition, r.offset)
                            for tp, rs in c.poll(timeout_ms=200).items() for r in rs]
        from priority_kafka.confluent import PriorityConsumer as ConfluentConsumer

        cc = ConfluentConsumer({"bootstrap.servers": bootstrap_servers, "group.id": group,
                                "max.priority": LEVELS, "auto.offset.reset": "latest",
                                "topic.metadata.refresh.interval.ms": 2000})
        cc.subscribe([topic])
        closing.append(cc)

        def poll() -> Polled:
            messages = cc.consume(100, 0.2)
            assert all(m.error() is None for m in messages), [m.error() for m in messages]
            return [(m.topic(), m.partition(), m.offset()) for m in messages]

        return poll

    yield make, request.param
    for c in closing:
        c.close()


@pytest.mark.integration
def test_partitions_added_under_traffic_are_read_from_their_start(
    family, bootstrap_servers, unique_name
):
    """auto_offset_reset=latest: what was produced before the group's first assignment is not
    read; records produced to partitions added to every level afterwards, before the consumer's
    metadata refresh sees them, are all read, from offset 0, while every level has traffic."""
    make, name = family
    topic, group = unique_name("added"), unique_name("g")
    names = create_priority_topics(bootstrap_servers, topic, LEVELS)
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=5)
    seen: Polled = []
    try:
        for level_topic in names:  # before the group exists: the reset policy skips these
            producer.send(level_topic, b"before", partition=0).get(30)
        poll = make(topic, group)
        # Traffic on partition 0 of every level until the consumer reads it on every level:
        # then each level's group has made its first assignment.
        deadline = time.monotonic() + 90
        while {t for t, _, _ in seen} != set(names):
            assert time.monotonic() < deadline, f"{name}: levels read: {seen[-5:]}"
            for level_topic in names:
                producer.send(level_topic, b"steady", partition=0)
            seen += poll()
        assert all(offset >= 1 for _, p, offset in seen if p == 0)  # "before" was skipped
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
        try:
            admin.create_partitions(
                {t: NewPartitions(total_count=1 + ADDED) for t in names})
        finally:
            admin.close()
        producer.close()
        # A new producer: its first metadata has the new partitions (the consumers' do not).
        producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=5)
        for _ in range(PER_NEW_PARTITION):  # at once: the consumers do not know them yet
            for level_topic in names:
                for partition in range(1, 1 + ADDED):
                    producer.send(level_topic, b"new", partition=partition)
                producer.send(level_topic, b"steady", partition=0)
        producer.flush(30)
        expected = {(t, p, o) for t in names for p in range(1, 1 + ADDED)
                    for o in range(PER_NEW_PARTITION)}
        deadline = time.monotonic() + 90
        while not expected <= set(seen):
            assert time.monotonic() < deadline, (
                f"{name}: missing {len(expected - set(seen))} of the added partitions' records, "
                f"e.g. {sorted(expected - set(seen))[:5]}")
            for level_topic in names:
                producer.send(level_topic, b"steady", partition=0)
            seen += poll()
    finally:
        producer.close()
    new = [(t, p, o) for t, p, o in seen if p >= 1]
    assert len(new) == len(set(new)) == len(expected)  # each once, nothing else
