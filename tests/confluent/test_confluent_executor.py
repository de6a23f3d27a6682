"""ShardedExecutor on confluent-kafka consumers, given as they are (its confluent client adapts
them)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    SerializingProducer,
    TopicPartition,
)
from confluent_kafka.serialization import StringSerializer
from helpers import consume_until, consumer, produce, run_in_thread

from priority_kafka import ConfigError, HandlerError, ShardedExecutor, create_priority_topics
from priority_kafka.confluent.executor import ConfluentClient, Record
from priority_kafka.executor._clients import as_client

pytestmark = pytest.mark.integration


def run_until(executor: ShardedExecutor, done: Any, timeout_s: float = 60.0) -> None:
    """Run the executor in a thread until ``done()``, then stop it and wait for it."""
    failure: list[BaseException] = []
    thread = run_in_thread(executor, failure)
    deadline = time.monotonic() + timeout_s
    try:
        while not done() and thread.is_alive():
            assert time.monotonic() < deadline, f"not done in {timeout_s} s: {executor.stats()}"
            time.sleep(0.05)
    finally:
        executor.stop()
        thread.join(60)
    assert not failure, failure


def committed(servers: str, group: str, topics: list[str]) -> dict[str, int]:
    probe = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        return {tp.topic: tp.offset for tp in probe.committed(
            [TopicPartition(t, 0) for t in topics], 10)}
    finally:
        probe.close()


def test_executor_on_priority_consumer_handles_all_once_and_commits(
    bootstrap_servers: str, topic: str
) -> None:
    """Every record of every level is handled once, as a Record with kafka-python's fields,
    and the commits reach every level's group."""
    produce(bootstrap_servers, topic, {0: 300, 1: 300, 2: 300})
    handled: Counter[tuple[str, int]] = Counter()
    types: set[type] = set()
    lock = threading.Lock()

    def handle(record: Any) -> None:
        with lock:
            handled[record.topic, record.offset] += 1
            types.add(type(record))

    levels = consumer(bootstrap_servers, "exec", **{"enable.auto.commit": False})
    adapter = as_client(levels)
    assert isinstance(adapter, ConfluentClient)
    assert adapter.levels.reserved == levels.reserved_quotas == {2: 287, 1: 142, 0: 71}
    assert adapter.levels.level_of(f"{topic}-1") == 1
    executor = ShardedExecutor(levels, handle, shards=4, commit_interval_ms=100)
    executor.subscribe([topic])
    run_until(executor, lambda: len(handled) == 900)
    assert set(handled.values()) == {1} and types == {Record}
    for level in range(3):
        assert committed(bootstrap_servers, f"exec-{level}", [f"{topic}-{level}"]) == {
            f"{topic}-{level}": 300
        }


def test_executor_on_plain_consumer_dead_letters_through_confluent(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """A plain confluent Consumer runs as one level; a failing record is dead-lettered through
    the user's producer as the bytes stored (its serializer, which takes str, is not used),
    and the commit passes it."""
    produce(bootstrap_servers, topic, {1: 50})
    source, dead = f"{topic}-1", unique_name("dead")
    handled: list[int] = []

    def handle(record: Any) -> None:
        if record.value == b"1:7":
            raise ValueError("poison")
        handled.append(record.offset)

    plain = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "plain",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
    letters = SerializingProducer({
        "bootstrap.servers": bootstrap_servers, "value.serializer": StringSerializer(),
    })
    executor = ShardedExecutor(
        plain, handle, shards=2, failure_policy="dead_letter",
        dead_letter_topic=dead, max_attempts=1, dead_letter_producer=letters,
    )
    executor.subscribe([source])
    run_until(executor, lambda: executor.stats().get("dead_lettered") == 1 and len(handled) == 49)
    assert letters.flush(10) == 0  # still the user's, open
    assert sorted(handled) == [o for o in range(50) if o != 7]
    assert committed(bootstrap_servers, "plain", [source]) == {source: 50}
    probe = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "dead-probe",
                      "auto.offset.reset": "earliest"})
    try:
        probe.assign([TopicPartition(dead, 0, 0)])
        letter = consume_until(probe, bool, num=1)[0]
        assert letter.value() == b"1:7"
        assert dict(letter.headers())["dead_letter.topic"] == source.encode()
    finally:
        probe.close()


def test_executor_runs_while_a_level_has_no_topic(bootstrap_servers: str, unique_name) -> None:
    """A level whose topic does not exist (yet) is simply not assigned, as on kafka-python:
    librdkafka's error event for it does not stop the executor, and the other levels' records
    are all handled. (subscribe() refuses a missing level unless told to wait for it:
    wait.for.topics.)"""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = unique_name("gap")
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for future in admin.create_topics(
        [NewTopic(f"{name}-{level}", 1, 1) for level in (0, 2)]
    ).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap_servers})
    for level in (0, 2):
        for i in range(100):
            producer.produce(f"{name}-{level}", f"{level}:{i}".encode())
    assert producer.flush(30) == 0
    handled: Counter[str] = Counter()
    lock = threading.Lock()

    def handle(record: Any) -> None:
        with lock:
            handled[record.value.decode()] += 1

    executor = ShardedExecutor(
        consumer(bootstrap_servers, unique_name("gap-g"),
                 **{"enable.auto.commit": False, "wait.for.topics": True}),
        handle, shards=2, commit_interval_ms=100,
    )
    executor.subscribe([name])
    run_until(executor, lambda: len(handled) == 200)
    assert set(handled.values()) == {1}


def test_stop_policy_commits_up_to_the_failed_record_and_raises(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """Under 'stop' on confluent-kafka, run() raises HandlerError and the failed record's level
    group is committed exactly up to it; no later record of its lane is handled."""
    produce(bootstrap_servers, topic, {1: 200, 2: 50})
    group = unique_name("stop")
    handled: list[int] = []

    def handle(record: Any) -> None:
        if record.topic == f"{topic}-1":
            if record.offset == 120:
                raise ValueError("bad record")
            handled.append(record.offset)

    executor = ShardedExecutor(consumer(bootstrap_servers, group, **{"enable.auto.commit": False}),
                               handle, shards=2, max_attempts=2,
                               retry_backoff_ms=10, failure_policy="stop")
    executor.subscribe([topic])
    with pytest.raises(HandlerError, match=r"@120 \('stop' policy\): ValueError") as info:
        executor.run()
    assert isinstance(info.value.__cause__, ValueError)
    assert committed(bootstrap_servers, f"{group}-1", [f"{topic}-1"]) == {f"{topic}-1": 120}
    assert sorted(handled) == list(range(120))


def test_a_priority_consumer_dead_letters_through_a_producer_of_the_executors_own(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """Without a dead_letter_producer, the executor's confluent client builds one that connects
    as the PriorityConsumer does; a plain Consumer, which does not tell, needs one given."""
    produce(bootstrap_servers, topic, {2: 20})
    dead = unique_name("dead")

    def handle(record: Any) -> None:
        if record.value == b"2:4":
            raise ValueError("poison")

    levels = consumer(bootstrap_servers, unique_name("own"), **{"enable.auto.commit": False})
    executor = ShardedExecutor(levels, handle, shards=2, failure_policy="dead_letter",
                               dead_letter_topic=dead, max_attempts=1)
    executor.subscribe([topic])
    run_until(executor, lambda: executor.stats().get("dead_lettered") == 1)
    probe = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "own-probe",
                      "auto.offset.reset": "earliest"})
    try:
        probe.assign([TopicPartition(dead, 0, 0)])
        assert consume_until(probe, bool, num=1)[0].value() == b"2:4"
    finally:
        probe.close()
    plain = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "plain-own"})
    try:
        with pytest.raises(ConfigError, match=r"pass 'dead_letter_producer'.*plain confluent"):
            ShardedExecutor(plain, handle, failure_policy="dead_letter", dead_letter_topic=dead)
    finally:
        plain.close()


class SeekRefusedWhileRevoking(Consumer):
    """A plain consumer whose ``seek`` of a partition fails as librdkafka's did in the chaos
    soak inside ``on_revoke``, the partition's committed offsets not fetched after its group's
    coordinator moved: ``_STATE`` ("Local: Erroneous state")."""

    def seek(self, partition: TopicPartition) -> None:  # type: ignore[override]
        self.refused = getattr(self, "refused", 0) + 1
        raise KafkaException(KafkaError(
            KafkaError._STATE, f"Failed to seek to offset {partition.offset}: Local: "
            "Erroneous state"))


def test_a_revoke_rewinds_nothing_librdkafka_is_letting_go(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """In a revoke, the executor rewinds the revoked partitions whose queued records it dropped
    (kafka-python keeps a position across an eager reassignment). librdkafka forgets a revoked
    partition's position, so the confluent adapter leaves such a seek alone: a seek refused
    with _STATE no longer escapes the callback and ends run(); the records come again from the
    committed offset, to this member or the other."""
    partitions = 4
    topic = unique_name("revoke")
    create_priority_topics(bootstrap_servers, topic, 3, num_partitions=partitions)
    produce(bootstrap_servers, topic, {0: 400}, partitions=partitions)
    level = f"{topic}-0"
    handled: Counter[tuple[int, int]] = Counter()
    lock = threading.Lock()

    def handle(record: Any) -> None:
        time.sleep(0.01)  # records stay queued, so the revoke has some to rewind
        with lock:
            handled[record.partition, record.offset] += 1

    group = f"{topic}-revoke"
    member = SeekRefusedWhileRevoking({
        "bootstrap.servers": bootstrap_servers, "group.id": group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    executor = ShardedExecutor(member, handle, shards=1, commit_interval_ms=100)
    executor.subscribe([level])
    other = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
    failure: list[BaseException] = []
    thread = run_in_thread(executor, failure)
    taken: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(handled) < 20:
            assert time.monotonic() < deadline and thread.is_alive(), (failure, handled)
            time.sleep(0.01)
        other.subscribe([level])
        while not taken:  # the other member takes some partitions: this one's were revoked
            assert time.monotonic() < deadline and thread.is_alive(), failure
            message = other.poll(0.1)
            taken = {tp.partition for tp in other.assignment()}
            if message is not None and message.error() is None:
                with lock:
                    handled[message.partition(), message.offset()] += 1
        other.close()  # its partitions come back from their commits (none: the first offset)
        while len(handled) < 400:
            assert time.monotonic() < deadline and thread.is_alive(), (failure, len(handled))
            time.sleep(0.05)
    finally:
        executor.stop()
        thread.join(60)
    assert not failure, failure
    assert len(handled) == 400 and 0 < len(taken) < partitions
    assert getattr(member, "refused", 0) == 0


def test_a_partition_held_in_librdkafka_is_fetched_again_soon_after_resume(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """A paused partition whose parked records reached ``park_bytes`` is paused in librdkafka,
    which, its prefetch having passed ``queued.min.messages``, fetched it again only when
    ``fetch.queue.backoff.ms`` (1 s by default) had passed, whatever the resume: the executor's
    workers sat idle meanwhile. The adapter seeks it to where it stands once it has returned
    nothing for REFETCH_AFTER_S (0.2 s) after the resume, so its next records come then, the
    first right after the last parked one."""
    produce(bootstrap_servers, topic, {1: 3000})
    source = f"{topic}-1"
    adapter = ConfluentClient(Consumer({
        "bootstrap.servers": bootstrap_servers, "group.id": unique_name("held"),
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "queued.min.messages": 1000,  # passed by the 3,000 records: the back-off applies
    }), max_poll_records=100, park_bytes=500)  # about 100 records of 5 B
    adapter.subscribe([source])
    try:
        deadline = time.monotonic() + 30
        first: dict[Any, list[Record]] = {}
        while not first:
            assert time.monotonic() < deadline, "no record in 30 s"
            first = adapter.poll(500)
        (tp,) = first
        adapter.pause(tp)
        while not adapter._held:  # parks a poll's records, then holds it in librdkafka
            assert time.monotonic() < deadline, "never held in librdkafka"
            assert adapter.poll(50) == {}
        parked = adapter.parked()
        held_at = time.monotonic()
        while time.monotonic() - held_at < 0.2:  # paused a while, as a busy executor does
            assert adapter.poll(20) == {}
        adapter.resume(tp)
        resumed_at = time.monotonic()
        offsets: list[int] = []
        while len(offsets) <= parked:
            assert time.monotonic() - resumed_at < 10, f"{len(offsets)} of {parked + 1}"
            offsets += [record.offset for record in adapter.poll(20).get(tp, [])]
        fetched_s = time.monotonic() - resumed_at
    finally:
        adapter.close()
    assert offsets[: parked + 1] == list(range(first[tp][-1].offset + 1,
                                               first[tp][-1].offset + parked + 2))
    # Without the seek: 0.8-0.94 s here (librdkafka 2.16); with it 0.2 s plus 2-5 ms, so 0.6 s
    # holds under a load of 10.
    assert fetched_s < 0.6, f"the first fetched record came {fetched_s:.2f} s after resume"
