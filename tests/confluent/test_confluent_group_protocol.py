"""The consumer group protocol (KIP-848, ``group.protocol=consumer``) on the confluent family,
against the real local broker; and what a kafka-python level does in such a group."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from helpers import consumer, is_highest_first, join, produce, run_in_thread

from priority_kafka import ConfigError, ShardedExecutor
from priority_kafka.confluent import InvalidArgError, PriorityConsumer

pytestmark = pytest.mark.integration

CONSUMER_PROTOCOL = {"group.protocol": "consumer"}
LEVELS = range(3)


def positions(messages: list[Any]) -> set[tuple[str, int, int]]:
    return {(m.topic(), m.partition(), m.offset()) for m in messages if m.error() is None}


def all_positions(topic: str, per_partition: int, partitions: int = 2) -> set[tuple[str, int, int]]:
    return {
        (f"{topic}-{level}", partition, offset)
        for level in LEVELS for partition in range(partitions) for offset in range(per_partition)
    }


def committed_offsets(servers: str, group: str, topic: str, partitions: int = 2) -> list[int]:
    """Every level's committed offsets, level 0 partition 0 first."""
    found = []
    for level in LEVELS:
        probe = Consumer({"bootstrap.servers": servers, "group.id": f"{group}-{level}"})
        try:
            found += [tp.offset for tp in probe.committed(
                [TopicPartition(f"{topic}-{level}", p) for p in range(partitions)], 10)]
        finally:
            probe.close()
    return found


def group_types(servers: str, group: str) -> set[Any]:
    admin = AdminClient({"bootstrap.servers": servers})
    names = [f"{group}-{level}" for level in LEVELS]
    return {future.result(10).type for future in admin.describe_consumer_groups(names).values()}


@pytest.mark.parametrize(("key", "value"), [
    ("session.timeout.ms", 10_000),
    ("heartbeat.interval.ms", 1_000),
    ("partition.assignment.strategy", "range"),
    ("group.protocol.type", "consumer"),
])
def test_a_property_the_broker_owns_is_refused_naming_it(key: str, value: Any) -> None:
    """Beside group.protocol=consumer (in any case), a property librdkafka refuses there is our
    InvalidArgError (a ConfigError and a KafkaException) naming it and what replaces it."""
    config = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "max.priority": 3,
              "group.protocol": "Consumer", key: value}
    with pytest.raises(InvalidArgError, match=f"'{key}' cannot be set with 'group.protocol': "
                                              f"'consumer'.*got '{key}': {value!r}") as info:
        PriorityConsumer(config)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, KafkaException)
    assert info.value.args[0].code() == KafkaError._INVALID_ARG
    # The classic protocol keeps it.
    PriorityConsumer({**config, "group.protocol": "classic"}).close()


def test_every_level_joins_with_the_consumer_protocol_and_commits(
    bootstrap_servers: str, topic2: str, unique_name: Any
) -> None:
    """Each level's group is a consumer-protocol group; every message is consumed once,
    highest level first, and a synchronous commit reaches every level's group."""
    group = unique_name("kip848")
    c = consumer(bootstrap_servers, group, **CONSUMER_PROTOCOL, **{"enable.auto.commit": False})
    try:
        c.subscribe([topic2])
        join(c, partitions=6)
        produce(bootstrap_servers, topic2, {0: 100, 1: 100, 2: 100}, partitions=2)
        seen: list[Any] = []
        deadline = time.monotonic() + 60
        while len(positions(seen)) < 300:
            assert time.monotonic() < deadline, f"{len(positions(seen))} of 300"
            batch = c.consume(50, 0.5)
            assert is_highest_first(batch)
            seen += batch
        assert len(seen) == 300 and positions(seen) == all_positions(topic2, 50)
        c.commit(asynchronous=False)
        assert group_types(bootstrap_servers, group) == {ConsumerGroupType.CONSUMER}
    finally:
        c.close()
    assert committed_offsets(bootstrap_servers, group, topic2) == [50] * 6


def test_a_joining_member_takes_partitions_incrementally_and_nothing_is_lost(
    bootstrap_servers: str, topic2: str, unique_name: Any
) -> None:
    """When a second member joins, each level revokes only the partitions it hands over
    (on_revoke gets those, never the whole assignment); committing after every batch, with a
    refused commit left to the next one, leaves every message consumed and committed."""
    group = unique_name("join")
    revoked: list[list[TopicPartition]] = []
    refused: Counter[int] = Counter()
    settings = {**CONSUMER_PROTOCOL, "enable.auto.commit": False, "max.poll.records": 30}
    first = consumer(bootstrap_servers, group, **settings)
    second = consumer(bootstrap_servers, group, **settings)
    seen: list[Any] = []

    def commit(member: PriorityConsumer) -> None:
        try:
            member.commit(asynchronous=False)
        except KafkaException as exc:  # e.g. a stale member epoch mid-reconciliation
            refused[exc.args[0].code()] += 1

    def step(member: PriorityConsumer) -> None:
        batch = member.consume(30, 0.1)
        seen.extend(batch)
        if batch:
            commit(member)

    try:
        first.subscribe([topic2], on_revoke=lambda c, partitions: revoked.append(partitions))
        join(first, partitions=6)
        produce(bootstrap_servers, topic2, {0: 200, 1: 200, 2: 200}, partitions=2)
        while len(positions(seen)) < 150:
            step(first)
        second.subscribe([topic2])
        deadline = time.monotonic() + 60
        while len(positions(seen)) < 600 or len(second.assignment()) < 3:
            assert time.monotonic() < deadline, (len(positions(seen)), second.assignment())
            step(first)
            step(second)
        for member in (first, second):
            commit(member)
        assert {(tp.topic, tp.partition) for tp in first.assignment()}.isdisjoint(
            (tp.topic, tp.partition) for tp in second.assignment())
        assert len(first.assignment()) == len(second.assignment()) == 3
    finally:
        first.close()
        second.close()
    assert positions(seen) == all_positions(topic2, 100)
    assert revoked and all(len(partitions) == 1 for partitions in revoked), revoked
    assert set(refused) <= {KafkaError.STALE_MEMBER_EPOCH, KafkaError.REBALANCE_IN_PROGRESS,
                            KafkaError._NO_OFFSET}, refused
    assert committed_offsets(bootstrap_servers, group, topic2) == [100] * 6


def test_executors_share_a_consumer_protocol_group_and_commit_everything(
    bootstrap_servers: str, topic2: str, unique_name: Any
) -> None:
    """Two ShardedExecutors on consumer-protocol PriorityConsumers, the second joining
    mid-stream: every record is handled, and once both stop every partition is committed to
    its end (a commit refused during reconciliation is made by a later one)."""
    produce(bootstrap_servers, topic2, {0: 300, 1: 300, 2: 300}, partitions=2)
    group = unique_name("exec")
    handled: Counter[tuple[str, int, int]] = Counter()
    by_member: Counter[int] = Counter()
    lock = threading.Lock()
    started, joined, enough = threading.Event(), threading.Event(), threading.Event()

    def handler(member: int) -> Any:
        def handle(record: Any) -> None:
            with lock:
                handled[record.topic, record.partition, record.offset] += 1
                by_member[member] += 1
                if len(handled) >= 200:
                    started.set()
                if len(handled) >= 900:
                    enough.set()
            if member == 1:
                joined.set()
            elif started.is_set():
                # The first member works slowly until the second takes part, so the join
                # lands mid-stream, whatever the machine's speed.
                joined.wait(0.01)

        return handle

    def executor(member: int) -> ShardedExecutor:
        adapter = consumer(
            bootstrap_servers, group, **CONSUMER_PROTOCOL, **{"enable.auto.commit": False}
        )
        built = ShardedExecutor(adapter, handler(member), shards=4, commit_interval_ms=50)
        built.subscribe([topic2])
        return built

    failures: list[BaseException] = []
    executors = [executor(0)]
    threads = [run_in_thread(executors[0], failures)]
    try:
        assert started.wait(60), (len(handled), failures)
        executors.append(executor(1))
        threads.append(run_in_thread(executors[1], failures))
        assert enough.wait(90), f"{len(handled)} of 900 handled"
    finally:
        for running in executors:
            running.stop()
        for thread in threads:
            thread.join(60)
    assert by_member[0] > 200 and by_member[1] > 0, by_member
    assert not failures, failures
    assert set(handled) == all_positions(topic2, 150)
    assert committed_offsets(bootstrap_servers, group, topic2) == [150] * 6


def test_a_static_member_fenced_by_the_new_rule_raises_a_clear_error(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """With the consumer protocol, a member joining with a group.instance.id a live member holds
    is fenced (not the older one): its consume() returns the fatal event, saying so, then
    raises it; an executor on such a member stops with it instead of waiting for ever."""
    group, instance = unique_name("static"), unique_name("instance")
    settings = {**CONSUMER_PROTOCOL, "group.instance.id": instance}
    holder = consumer(bootstrap_servers, group, **settings)
    late = consumer(bootstrap_servers, group, **settings)
    try:
        holder.subscribe([topic])
        join(holder, partitions=3)
        late.subscribe([topic])
        deadline = time.monotonic() + 30
        with pytest.raises(KafkaException) as info:
            while True:
                assert time.monotonic() < deadline, "the late member was not fenced"
                holder.consume(10, 0.05)
                events = [m.error() for m in late.consume(10, 0.1) if m.error() is not None]
                told = [e.str() for e in events]
                assert all(e.fatal() and instance in e.str() for e in events), told
        error = info.value.args[0]
        assert error.fatal() and error.code() == KafkaError._FATAL
        assert f"'group.instance.id' {instance!r}" in error.str()
        assert "still used by another member" in error.str()
        assert len(holder.assignment()) == 3
        adapter = consumer(bootstrap_servers, group, **settings)
        fenced = ShardedExecutor(adapter, lambda record: None, shards=1)
        fenced.subscribe([topic])
        failures: list[BaseException] = []
        thread = run_in_thread(fenced, failures)
        deadline = time.monotonic() + 30
        while thread.is_alive() and time.monotonic() < deadline:
            holder.consume(10, 0.05)  # the holder stays in the group meanwhile
        if thread.is_alive():
            fenced.stop()
            thread.join(30)
            pytest.fail("the executor on a fenced member did not stop")
        assert len(failures) == 1 and isinstance(failures[0], KafkaException), failures
        assert "still used by another member" in failures[0].args[0].str()
    finally:
        holder.close()
        late.close()


def test_a_kafka_python_level_joins_a_consumer_protocol_group_as_a_classic_member(
    bootstrap_servers: str, topic2: str, unique_name: Any
) -> None:
    """kafka-python speaks only the classic protocol. In a level group that has a
    consumer-protocol member, the broker takes it in as a classic member of that consumer
    group: the broker's assignor splits the partitions between both (kafka-python's own
    partition_assignment_strategy does not decide it), the confluent member gives up only what
    moves, and once the kafka-python member leaves, the rest is handed back."""
    from priority_kafka import PriorityConsumer as KafkaPythonPriorityConsumer

    group = unique_name("mixed")
    confluent_member = consumer(bootstrap_servers, group, **CONSUMER_PROTOCOL)
    revoked: list[list[TopicPartition]] = []
    classic = KafkaPythonPriorityConsumer(
        topic2, bootstrap_servers=bootstrap_servers, group_id=group, max_priority=3,
        auto_offset_reset="earliest",
    )
    try:
        confluent_member.subscribe(
            [topic2], on_revoke=lambda c, partitions: revoked.append(partitions)
        )
        join(confluent_member, partitions=6)
        deadline = time.monotonic() + 60
        while len(classic.assignment()) < 3 or len(confluent_member.assignment()) > 3:
            assert time.monotonic() < deadline, (classic.assignment(),
                                                 confluent_member.assignment())
            classic.poll(timeout_ms=50)
            confluent_member.consume(10, 0.05)
        assert group_types(bootstrap_servers, group) == {ConsumerGroupType.CONSUMER}
        assert len(classic.assignment()) == len(confluent_member.assignment()) == 3
        assert {(tp.topic, tp.partition) for tp in classic.assignment()}.isdisjoint(
            (tp.topic, tp.partition) for tp in confluent_member.assignment())
        assert all(len(partitions) == 1 for partitions in revoked), revoked
    finally:
        classic.close()
    try:
        deadline = time.monotonic() + 30
        while len(confluent_member.assignment()) < 6:
            assert time.monotonic() < deadline, confluent_member.assignment()
            confluent_member.consume(10, 0.05)
    finally:
        confluent_member.close()
