"""Tests of priority_kafka.kafka_python._kafka: the kafka-python work-arounds and helpers."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import IO, Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.errors import KafkaTimeoutError
from kafka.future import Future
from kafka.structs import MemberState, OffsetAndMetadata, TopicPartition

from priority_kafka.kafka_python._kafka import (
    DESERIALIZER_ERROR_STOPS_POLL,
    FORGETS_PENDING_JOIN,
    NO_RECORDS_WHILE_JOINING,
    REPLACES_FINISHED_JOIN,
    STALE_OFFSET_FETCH_REUSED,
    all_of,
    fetch_kept_partitions,
    flush_within,
    forget_earlier_offset_fetches,
    keep_pending_join,
    keeps_partitions_while_joining,
    listed_topics,
    release_parked_records,
)


class Drained:
    """Stands in for a fully drained PartitionRecords: falsy, not None."""

    def __bool__(self) -> bool:
        return False


def test_drained_in_line_slot_is_cleared() -> None:
    """A drained in-line slot becomes None, so parked records can be restored."""
    consumer = SimpleNamespace(_fetcher=SimpleNamespace(_next_partition_records=Drained()))
    release_parked_records(consumer)
    assert consumer._fetcher._next_partition_records is None


def test_slot_with_records_is_kept() -> None:
    """An in-line slot that still holds records is left alone."""
    records = object()  # truthy, like a PartitionRecords with records left
    consumer = SimpleNamespace(_fetcher=SimpleNamespace(_next_partition_records=records))
    release_parked_records(consumer)
    assert consumer._fetcher._next_partition_records is records


def test_other_consumers_are_ignored() -> None:
    """A consumer without kafka-python's fetcher internals is not touched."""
    release_parked_records(object())


def test_all_of_succeeds_once_every_future_succeeded() -> None:
    """The combined future resolves only after the last of its futures, with the given value."""
    first, second = Future(), Future()
    combined = all_of([first, second], value="done")
    first.success(1)
    assert not combined.is_done
    second.success(2)
    assert combined.succeeded() and combined.value == "done"


def test_all_of_fails_with_the_first_failure_after_all_answered() -> None:
    """A failure is reported once every future answered, as the first exception seen."""
    first, second = Future(), Future()
    combined = all_of([first, second])
    first.failure(ValueError("boom"))
    assert not combined.is_done
    second.success(None)
    assert combined.failed() and isinstance(combined.exception, ValueError)


def test_all_of_nothing_succeeds_at_once() -> None:
    """No futures: nothing to wait for."""
    assert all_of([], value=3).value == 3


@pytest.mark.integration
def test_every_resumed_partition_is_consumed_to_the_end(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    """Pausing all partitions while data is buffered, then resuming: every record arrives."""
    topic = unique_name("parked")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    for i in range(3000):
        producer.send(topic, value=b"x", partition=i % 3)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=50,
    )
    # Assigned, not subscribed: the subject is the fetcher's parked records. Subscribed, a
    # fresh group's first join may come before the topic's metadata (an empty assignment), and
    # the rejoin that follows is forgotten when it outlasts a poll (FORGETS_PENDING_JOIN): once
    # in a CI run it read nothing for 60 s.
    consumer.assign([TopicPartition(topic, partition) for partition in range(3)])
    try:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 3000 and time.monotonic() < deadline:
            release_parked_records(consumer)
            batch = consumer.poll(timeout_ms=50)
            seen += sum(map(len, batch.values()))
            if batch:  # park what is buffered, then let it go again on the next round
                consumer.pause(*batch)
                seen += sum(map(len, consumer.poll(timeout_ms=20).values()))
                consumer.resume(*batch)
        assert seen == 3000
    finally:
        consumer.close()


@pytest.mark.integration
def test_an_offset_fetch_of_an_earlier_generation_is_not_reused(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    """STALE_OFFSET_FETCH_REUSED is what the installed kafka-python does: a committed() that
    gave up before its answer leaves that fetch in the coordinator's table, and the next fetch
    of the same partition returns its old answer even after a rebalance (offset 5 after 9 was
    committed in the next generation); with forget_earlier_offset_fetches it asks the broker
    again, and within a generation an answer is still picked up by the next fetch (as Java's
    consumer does; zero-timeout polls progress no other way). When a release fixes the bug,
    the first assertion fails: bound the flag and drop the work-around."""
    topic = unique_name("stale-fetch")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    admin.close()
    partition = TopicPartition(topic, 0)

    def answers(fixed: bool) -> tuple[int | None, int | None]:
        """The answers after a given-up fetch: in its generation, then after a rebalance."""
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap_servers,
                                 group_id=unique_name("stale-fetch-g"), enable_auto_commit=False)
        if fixed:
            forget_earlier_offset_fetches(consumer)
        coordinator = consumer._coordinator

        def joined(generation: int) -> None:
            deadline = time.monotonic() + 60
            while coordinator._generation.generation_id <= generation or not consumer.assignment():
                assert time.monotonic() < deadline, "the consumer did not join"
                consumer.poll(timeout_ms=300)
                keep_pending_join(consumer)

        def given_up_fetch(offset: int) -> None:
            """Commit ``offset``, then a committed() that gives up at once; its answer comes."""
            consumer.commit({partition: OffsetAndMetadata(offset, "", -1)})
            with pytest.raises(KafkaTimeoutError):  # sent, then given up at once
                consumer.committed(partition, timeout_ms=0)
            (given_up,) = coordinator._offset_fetch_futures.values()
            answered = threading.Event()
            given_up.add_both(lambda _: answered.set())
            assert answered.wait(30) and given_up.value[partition].offset == offset

        try:
            joined(0)
            given_up_fetch(3)
            same_generation = consumer.committed(partition, timeout_ms=30_000)
            given_up_fetch(5)
            coordinator.request_rejoin()  # a rebalance: the next generation
            joined(coordinator._generation.generation_id)
            consumer.commit({partition: OffsetAndMetadata(9, "", -1)})
            return same_generation, consumer.committed(partition, timeout_ms=30_000)
        finally:
            consumer.close()

    assert (answers(fixed=False)[1] == 5) == STALE_OFFSET_FETCH_REUSED
    assert answers(fixed=True) == (3, 9)


DESERIALIZER_PROBE = """
import sys
from kafka import KafkaConsumer

raised = []

def deserialize(value):
    if value == b"bad" and not raised:
        raised.append(value)
        raise ValueError("bad")
    return value

consumer = KafkaConsumer(
    sys.argv[1], bootstrap_servers=sys.argv[2], group_id=sys.argv[3],
    auto_offset_reset="earliest", enable_auto_commit=False, value_deserializer=deserialize,
)
seen = 0
while seen < 10:
    try:
        seen += sum(map(len, consumer.poll(timeout_ms=200).values()))
    except ValueError:
        print("raised", flush=True)
consumer.close()
print("all", seen, flush=True)
"""


@pytest.mark.integration
def test_deserializer_error_stops_poll_matches_kafka_python(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    """DESERIALIZER_ERROR_STOPS_POLL is what the installed kafka-python does: after its own
    deserializer raised once, a plain KafkaConsumer never returns the remaining records (its
    poll() hangs). When a kafka-python release fixes it, this fails: bound the flag and drop
    the work-around."""
    topic = unique_name("deser")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    for i in range(10):
        producer.send(topic, value=b"bad" if i == 3 else b"ok")
    producer.close()
    probe = subprocess.Popen(
        [sys.executable, "-c", DESERIALIZER_PROBE, topic, bootstrap_servers, unique_name("g")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert probe.stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def read(stdout: IO[str]) -> None:
        for line in stdout:
            lines.put(line.strip())

    reader = threading.Thread(target=read, args=(probe.stdout,), daemon=True)
    reader.start()
    try:
        # Starting, joining the group and fetching take what they take on a loaded machine
        # (over 15 s once in CI): the raise is waited for itself.
        assert lines.get(timeout=120) == "raised"
        # From there, a poll() that goes on returns the rest of the fetched batch at once; the
        # bug leaves it hanging.
        try:
            rest = lines.get(timeout=15)
            stuck = False
        except queue.Empty:
            rest, stuck = "", True
    finally:
        if probe.poll() is None:
            probe.kill()
        probe.wait(10)
        reader.join(10)
    assert stuck == DESERIALIZER_ERROR_STOPS_POLL
    assert stuck or rest.startswith("all "), rest


@pytest.mark.integration
def test_zero_timeout_polls_forget_a_pending_join(bootstrap_servers: str) -> None:
    """FORGETS_PENDING_JOIN is what the installed kafka-python does: after partitions are
    added, a plain KafkaConsumer polled with timeout_ms=0 never takes them (it sits in
    REBALANCING with its old assignment); with the work-around a PriorityConsumer level
    applies, it takes them within seconds. When a release fixes the bug, the first assertion
    fails: bound the flag and drop the work-around (benchmarks/kafka_python_join_stall.py)."""
    from benchmarks.kafka_python_join_stall import trial

    # Up to two plain trials, the first that stalls (10 s) ends them.
    plain = []
    for _ in range(2):
        plain.append(trial(bootstrap_servers, "plain", wait_s=10))
        if plain[-1]["stalled"]:
            break
    assert plain[-1]["stalled"] == FORGETS_PENDING_JOIN, plain
    stalled = plain[-1]
    assert stalled["group_state"] == "<rebalancing>" and list(stalled["positions"]) == [0]
    fixed = trial(bootstrap_servers, "workaround", wait_s=20)
    assert not fixed["stalled"] and fixed["seconds_to_added_partition"] < 10, fixed


def test_keep_pending_join_flags_only_a_pending_join() -> None:
    """A join task in flight with no rejoin flag gets the flag; nothing else is touched."""

    class Coordinator:
        group_id = "g"

        def __init__(self, task: object, flagged: bool) -> None:
            self._join_task, self.rejoin_needed = task, flagged

        def request_rejoin(self) -> None:
            self.rejoin_needed = True

    forgotten = SimpleNamespace(_coordinator=Coordinator(Future(), flagged=False))
    assert keep_pending_join(forgotten) is FORGETS_PENDING_JOIN
    assert forgotten._coordinator.rejoin_needed is FORGETS_PENDING_JOIN
    for coordinator in (Coordinator(None, flagged=False), Coordinator(Future(), flagged=True)):
        assert not keep_pending_join(SimpleNamespace(_coordinator=coordinator))
    assert not keep_pending_join(object())


@pytest.mark.integration
def test_a_join_finished_between_polls_is_applied(bootstrap_servers: str) -> None:
    """REPLACES_FINISHED_JOIN is what the installed kafka-python does: a consumer joining a
    fresh group with zero-timeout polls throws away every join that finished between two polls
    and starts another round (its generation climbs); with keep_pending_join after each poll
    the first finished join is applied. When a release fixes the bug, the first assertion
    fails: bound the flag and drop the work-around (benchmarks/kafka_python_join_stall.py)."""
    from benchmarks.kafka_python_join_stall import join_trial

    # Up to three plain trials, the first that shows the bug ends them (each can take 20 s).
    plain = []
    for _ in range(3):
        plain.append(join_trial(bootstrap_servers, "plain", wait_s=20))
        if plain[-1]["generation"] > 2:
            break
    assert (plain[-1]["generation"] > 2) == REPLACES_FINISHED_JOIN, plain
    fixed = [join_trial(bootstrap_servers, "workaround", wait_s=20) for _ in range(2)]
    assert all(not run["stalled"] and run["generation"] <= 2 for run in fixed), fixed


def test_a_finished_join_nobody_awaited_waits_for_the_next_poll() -> None:
    """keep_pending_join hooks the join task once; when it succeeds with no poll awaiting it,
    the coordinator holds a task that is not done and completes with the same assignment as
    soon as the next poll awaits it. A task a poll already took is left alone."""

    class Coordinator:
        group_id = "g"
        rejoin_needed = True

        def __init__(self, task: object) -> None:
            self._join_task = task

    task = Future()
    coordinator = Coordinator(task)
    consumer = SimpleNamespace(_coordinator=coordinator)
    keep_pending_join(consumer)
    keep_pending_join(consumer)  # hooked once, not per poll
    task.success(b"assignment")
    if not REPLACES_FINISHED_JOIN:
        assert coordinator._join_task is task
        return
    kept = coordinator._join_task
    assert kept is not task and not kept.is_done
    got: list[bytes] = []
    kept.add_callback(got.append)
    assert got == [b"assignment"] and kept.succeeded()

    taken = Future()
    coordinator._join_task = taken
    keep_pending_join(consumer)
    coordinator._join_task = None  # what a poll that awaited it does
    taken.success(b"applied")
    assert coordinator._join_task is None


def test_kept_partitions_are_fetched_only_during_a_cooperative_join() -> None:
    """fetch_kept_partitions reads through the fetcher only for a cooperative member that is
    joining and still owns partitions; an eager member, a settled one, one with nothing
    assigned and other clients get nothing."""
    kept = TopicPartition("t", 0)

    class Fetcher:
        def fetch_records(self, max_records: int, update_offsets: bool, timeout_ms: int) -> Any:
            assert update_offsets and timeout_ms == 0
            return {kept: ["r"] * max_records}, False

    def consumer(protocol: Any, *, rejoining: bool, assigned: bool) -> SimpleNamespace:
        coordinator = SimpleNamespace(
            group_id="g", _rebalance_protocol=protocol, rejoin_needed=rejoining,
            _join_task=None, state=MemberState.STABLE,
        )
        return SimpleNamespace(
            _coordinator=coordinator, _fetcher=Fetcher(),
            assignment=lambda: {kept} if assigned else set(),
        )

    joining = consumer(RebalanceProtocol.COOPERATIVE, rejoining=True, assigned=True)
    assert keeps_partitions_while_joining(joining) is NO_RECORDS_WHILE_JOINING
    assert fetch_kept_partitions(joining, 2) == ({kept: ["r", "r"]} if NO_RECORDS_WHILE_JOINING
                                                 else {})
    for other in (
        consumer(RebalanceProtocol.EAGER, rejoining=True, assigned=True),
        consumer(RebalanceProtocol.COOPERATIVE, rejoining=False, assigned=True),
        consumer(RebalanceProtocol.COOPERATIVE, rejoining=True, assigned=False),
        object(),
    ):
        assert not keeps_partitions_while_joining(other)
        assert fetch_kept_partitions(other, 2) == {}


class _Batches:
    """A producer's accumulator whose batches finish ``apart_s`` after one another, in the
    order kafka-python's flush waits on them: the case where each gets the whole timeout."""

    def __init__(self, count: int, apart_s: float) -> None:
        from kafka.producer.future import FutureProduceResult
        from kafka.producer.record_accumulator import RecordAccumulator

        futures = [FutureProduceResult(TopicPartition("t", 0)) for _ in range(count)]
        self.batches = [SimpleNamespace(produce_future=f) for f in futures]
        self._incomplete = SimpleNamespace(all=lambda: list(self.batches))
        self._flushes_in_progress = SimpleNamespace(decrement=lambda: None)
        self.begin_flush = lambda: None
        self.await_flush_completion = RecordAccumulator.await_flush_completion.__get__(self)

        def finish() -> None:
            for future in futures:
                time.sleep(apart_s)
                future.success((0, 0, 0))

        threading.Thread(target=finish, daemon=True).start()


def test_flush_within_bounds_the_whole_flush_where_kafka_python_bounds_each_batch() -> None:
    """Ten batches finishing 0.2 s apart: kafka-python's flush(1.0) waits for all of them (about
    2 s, each wait under its 1 s); flush_within(1.0) raises after 1 s, naming what is left."""
    from kafka.errors import KafkaTimeoutError

    def producer() -> Any:
        return SimpleNamespace(_accumulator=_Batches(10, 0.2),
                               _sender=SimpleNamespace(wakeup=lambda: None))

    theirs = producer()
    started = time.monotonic()
    KafkaProducer.flush(SimpleNamespace(_accumulator=theirs._accumulator,
                                        _sender=theirs._sender), timeout=1.0)
    kafka_python_s = time.monotonic() - started
    assert kafka_python_s > 1.5
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match=r"batch\(es\) still unsent after 1 s"):
        flush_within(producer(), 1.0)
    assert time.monotonic() - started < 1.4


def test_listed_topics_asks_again_while_a_connection_drops_under_it() -> None:
    """kafka-python raises a dropped connection out of topics(): asked again, within the
    bound, then raised."""
    from kafka.errors import KafkaConnectionError

    class Dropping:
        def __init__(self, drops: int) -> None:
            self.drops = drops

        def topics(self) -> set[str]:
            if self.drops:
                self.drops -= 1
                raise KafkaConnectionError("socket disconnected")
            return {"a-0", "a-1"}

    assert listed_topics(Dropping(2), timeout_s=5.0) == {"a-0", "a-1"}
    with pytest.raises(KafkaConnectionError):
        listed_topics(Dropping(1000), timeout_s=0.6)
