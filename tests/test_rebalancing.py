"""Rebalances through PriorityConsumer + ShardedExecutor against the real broker: partitions
added under traffic, cooperative-sticky, static membership, and the revoke-time commit."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewPartitions
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.future import Future

from priority_kafka import PriorityConsumer, create_priority_topics, priority_topic
from priority_kafka._kafka import ConsumerRebalanceListener, TopicPartition
from priority_kafka.executor import ShardedExecutor

pytestmark = pytest.mark.integration

LEVELS = 3
QUICK_SESSIONS = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 1_000}
COOPERATIVE = {"partition_assignment_strategy": [CooperativeStickyAssignor]}


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    return [
        TopicPartition(priority_topic(topic, level), p)
        for level in range(LEVELS)
        for p in range(count)
    ]


class Events(ConsumerRebalanceListener):
    """A user listener noting every rebalance call, and the partitions owned after each."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str, frozenset[TopicPartition]]] = []
        self.owned: set[TopicPartition] = set()
        self._lock = threading.Lock()

    def _note(self, kind: str, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            self.calls.append((time.monotonic(), kind, frozenset(partitions)))
            if kind == "assigned":
                self.owned |= set(partitions)
            else:
                self.owned -= set(partitions)

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._note("revoked", revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._note("assigned", assigned)

    def on_partitions_lost(self, lost: Any) -> None:
        self._note("lost", lost)

    def since(self, moment: float, *kinds: str) -> list[frozenset[TopicPartition]]:
        with self._lock:
            return [parts for at, kind, parts in self.calls if at >= moment and kind in kinds]


class Handled:
    """What the members' handlers saw: (time, member, partition, value), shared by members."""

    def __init__(self) -> None:
        self.log: list[tuple[float, str, TopicPartition, bytes]] = []
        self._lock = threading.Lock()

    def handler(self, member: str, delay_s: float = 0.0) -> Callable[[Any], None]:
        def handle(record: Any) -> None:
            if delay_s:
                time.sleep(delay_s)
            with self._lock:
                self.log.append((time.monotonic(), member, TopicPartition(record.topic,
                                 record.partition), record.value))

        return handle

    def values(self) -> Counter[bytes]:
        with self._lock:
            return Counter(value for _, _, _, value in self.log)

    def count(self, member: str | None = None) -> int:
        with self._lock:
            return sum(1 for _, m, _, _ in self.log if member in (None, m))

    def partitions(self, member: str | None = None) -> set[TopicPartition]:
        with self._lock:
            return {tp for _, m, tp, _ in self.log if member in (None, m)}

    def first_time(self, tp: TopicPartition) -> float | None:
        with self._lock:
            return next((at for at, _, p, _ in self.log if p == tp), None)

    def longest_gap(self, tp: TopicPartition, start: float, end: float) -> float:
        """The longest time in [start, end] without a record of ``tp`` handled."""
        with self._lock:
            times = [at for at, _, p, _ in self.log if p == tp and start <= at <= end]
        marks = [start, *times, end]
        return max(b - a for a, b in itertools.pairwise(marks))


class Traffic:
    """Produces ``<partition>:<seq>`` to each target partition ``rate`` times a second."""

    def __init__(self, bootstrap: str, targets: Iterable[TopicPartition], rate: float) -> None:
        # Short metadata age: a partition just added must become known to send to it.
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap, linger_ms=5, metadata_max_age_ms=200
        )
        self._targets = list(targets)
        self._interval = 1 / rate
        self._futures: list[Future] = []
        self.sent: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def add(self, tp: TopicPartition) -> None:
        """Send to ``tp`` too, once the producer knows it (a partition just added)."""
        wait_for(lambda: tp.partition in self._producer.partitions_for(tp.topic), 10,
                 f"the producer to see {tp}")
        self._targets = [*self._targets, tp]

    def _run(self) -> None:
        seq = 0
        while not self._stop.wait(self._interval):
            for tp in self._targets:
                value = f"{tp.topic}/{tp.partition}:{seq}".encode()
                self._futures.append(self._producer.send(tp.topic, value, partition=tp.partition))
                self.sent.append(value)
            seq += 1

    def stop(self) -> list[bytes]:
        """Stop, wait until every record is acknowledged; what was sent."""
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(30)
        for future in self._futures:
            future.get(timeout=30)
        self._producer.close()
        return self.sent


class Member:
    """A ShardedExecutor over a PriorityConsumer, run on a thread, with an Events listener."""

    def __init__(
        self, name: str, bootstrap: str, topic: str, group: str, handled: Handled,
        delay_s: float = 0.0, **configs: Any,
    ) -> None:
        self.name = name
        commit_interval_ms = configs.pop("commit_interval_ms", 200)
        self.consumer = PriorityConsumer(
            max_priority=LEVELS, bootstrap_servers=bootstrap, group_id=group,
            enable_auto_commit=False, auto_offset_reset="earliest", **configs,
        )
        self.events = Events()
        self.executor = ShardedExecutor(
            self.consumer, handled.handler(name, delay_s), shards=4,
            commit_interval_ms=commit_interval_ms,
        )
        self.executor.subscribe([topic], listener=self.events)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.executor.run()
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self.executor.stop()
        self.thread.join(60)
        assert not self.thread.is_alive(), f"member {self.name} did not stop"
        assert self.error is None, f"member {self.name} failed: {self.error!r}"


@pytest.fixture
def members() -> Iterator[Callable[..., Member]]:
    """Start members; every one still running is stopped at the end."""
    started: list[Member] = []

    def start(*args: Any, **kwargs: Any) -> Member:
        started.append(Member(*args, **kwargs))
        return started[-1]

    yield start
    for member in started:
        if member.thread.is_alive():
            member.stop()


def settled(*members: Member, partitions: Iterable[TopicPartition]) -> Callable[[], bool]:
    """True once the members own ``partitions`` between them, each some of every level."""
    wanted = set(partitions)

    def check() -> bool:
        owned = [set(m.events.owned) for m in members]
        levels = [{tp.topic for tp in own} for own in owned]
        return (
            sum(map(len, owned)) == len(wanted)
            and set().union(*owned) == wanted
            and all(len(topics) == LEVELS for topics in levels)
        )

    return check


# -- partitions added ---------------------------------------------------------------------------


@pytest.mark.parametrize("level", range(LEVELS))
def test_partitions_added_to_a_level_under_traffic_are_handled_and_nothing_stalls(
    bootstrap_servers: str, unique_name: Callable[[str], str], members: Callable[..., Member],
    level: int,
) -> None:
    """A partition added to one level while records flow is handled within
    metadata_max_age_ms + 5 s; every record is handled; no other partition stops for long."""
    topic, group = unique_name("grow"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=2)
    old = partitions_of(topic, 2)
    handled = Handled()
    traffic = Traffic(bootstrap_servers, old, rate=20)
    members("m", bootstrap_servers, topic, group, handled, metadata_max_age_ms=2000,
            **QUICK_SESSIONS)
    wait_for(lambda: handled.partitions() == set(old), 40, "every partition handled")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_partitions({priority_topic(topic, level): NewPartitions(total_count=3)})
    finally:
        admin.close()
    added_at = time.monotonic()
    new = TopicPartition(priority_topic(topic, level), 2)
    traffic.add(new)
    wait_for(lambda: handled.first_time(new) is not None, 2 + 5 + 3, "the new partition")
    pickup = handled.first_time(new) - added_at  # type: ignore[operator]
    wait_for(lambda: time.monotonic() > added_at + pickup + 2, 10, "two more seconds of traffic")
    sent = traffic.stop()
    stopped_at = time.monotonic()
    wait_for(lambda: set(sent) <= set(handled.values()), 30, "every record sent")
    gaps = {tp: handled.longest_gap(tp, added_at, stopped_at) for tp in old}
    print(f"level {level}: new partition handled {pickup:.2f} s after it was added; longest "
          f"gap of the others {max(gaps.values()):.2f} s; {len(sent)} records")
    assert pickup <= 2 + 5
    assert max(gaps.values()) < 5, gaps


# -- cooperative-sticky -------------------------------------------------------------------------


def test_cooperative_join_revokes_only_moved_partitions_and_kept_ones_keep_flowing(
    bootstrap_servers: str, unique_name: Callable[[str], str], members: Callable[..., Member],
) -> None:
    """With CooperativeStickyAssignor, a second member joining revokes from the first only the
    partitions that move to it, and the first keeps handling the partitions it keeps."""
    topic, group = unique_name("coop"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=4)
    everything = partitions_of(topic, 4)
    handled = Handled()
    traffic = Traffic(bootstrap_servers, everything, rate=25)
    first = members("1", bootstrap_servers, topic, group, handled, **COOPERATIVE,
                    **QUICK_SESSIONS)
    wait_for(lambda: handled.partitions("1") == set(everything), 40, "the first member")
    joined_at = time.monotonic()
    second = members("2", bootstrap_servers, topic, group, handled, **COOPERATIVE,
                     **QUICK_SESSIONS)
    wait_for(settled(first, second, partitions=everything), 40, "both members to settle")
    settled_at = time.monotonic()
    moved = set(second.events.owned)
    kept = set(first.events.owned)
    wait_for(lambda: handled.partitions("2") == moved, 20, "the second member to handle")
    sent = traffic.stop()
    wait_for(lambda: set(sent) <= set(handled.values()), 30, "every record sent")
    revoked = first.events.since(joined_at, "revoked", "lost")
    gaps = {tp: handled.longest_gap(tp, joined_at, settled_at) for tp in kept}
    print(f"cooperative join: {len(moved)} moved in {len(revoked)} revokes, settled in "
          f"{settled_at - joined_at:.2f} s; longest gap of a kept partition "
          f"{max(gaps.values()):.2f} s")
    assert len(moved) == len(kept) == len(everything) // 2
    assert set().union(*revoked) == moved
    assert first.events.since(joined_at, "assigned") == []
    assert max(gaps.values()) < 3, gaps


# -- static membership --------------------------------------------------------------------------


def test_a_static_member_restarted_within_the_session_gets_its_partitions_back_silently(
    bootstrap_servers: str, unique_name: Callable[[str], str], members: Callable[..., Member],
) -> None:
    """Members with group_instance_id: one closed (no LeaveGroup) and restarted within
    session_timeout_ms gets the same partitions back, and the other sees no rebalance."""
    topic, group = unique_name("static"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=2)
    everything = partitions_of(topic, 2)
    handled = Handled()
    traffic = Traffic(bootstrap_servers, everything, rate=20)
    static = {"session_timeout_ms": 20_000, "heartbeat_interval_ms": 1_000}
    a = members("a", bootstrap_servers, topic, group, handled, group_instance_id="a", **static)
    b = members("b", bootstrap_servers, topic, group, handled, group_instance_id="b", **static)
    wait_for(settled(a, b, partitions=everything), 40, "both members to settle")
    wait_for(lambda: handled.partitions() == set(everything), 20, "every partition handled")
    owned_by_a = set(a.events.owned)
    quiet_from = time.monotonic()
    a.stop()
    again = members("a2", bootstrap_servers, topic, group, handled, group_instance_id="a",
                    **static)
    wait_for(lambda: again.events.owned == owned_by_a, 15, "the restarted member's partitions")
    back_at = time.monotonic()
    wait_for(lambda: handled.partitions("a2") == owned_by_a, 15, "the restarted member to handle")
    sent = traffic.stop()
    wait_for(lambda: set(sent) <= set(handled.values()), 30, "every record sent")
    print(f"static restart: partitions back {back_at - quiet_from:.2f} s after the stop began")
    assert b.events.since(quiet_from, "revoked", "lost", "assigned") == []
    # Eager revokes the (empty) assignment before a first join: that is no rebalance.
    assert [p for p in again.events.since(0, "revoked", "lost") if p] == []


# -- revoke-time commit -------------------------------------------------------------------------


@pytest.mark.parametrize("revoke_commit", [True, False], ids=["committed", "commit-disabled"])
def test_the_revoke_time_commit_bounds_duplicates_of_a_join(
    bootstrap_servers: str, unique_name: Callable[[str], str], members: Callable[..., Member],
    revoke_commit: bool,
) -> None:
    """With no periodic commit, a member joining makes the first replay at most the records in
    flight when it revoked; without the revoke-time commit it replays what it handled."""
    topic, group = unique_name("dup"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=2)
    everything = partitions_of(topic, 2)
    traffic = Traffic(bootstrap_servers, everything, rate=50)
    handled = Handled()
    first = members("1", bootstrap_servers, topic, group, handled, delay_s=0.002,
                    commit_interval_ms=600_000, **QUICK_SESSIONS)
    if not revoke_commit:
        # The switch: the revoke hook's commit_async answers without committing anything.
        first.consumer.commit_async = lambda offsets=None, callback=None: Future().success(None)
    wait_for(lambda: handled.partitions("1") == set(everything), 40, "the first member")
    second = members("2", bootstrap_servers, topic, group, handled, delay_s=0.002,
                     commit_interval_ms=600_000, **QUICK_SESSIONS)
    wait_for(settled(first, second, partitions=everything), 40, "both members to settle")
    moved = set(second.events.owned)
    wait_for(lambda: handled.partitions("2") == moved, 20, "the second to handle")
    sent = traffic.stop()
    wait_for(lambda: set(sent) <= set(handled.values()), 30, "every record sent")
    duplicates = sum(n - 1 for n in handled.values().values())
    # What the first member handled of them: all is replayed unless the revoke committed.
    replayable = sum(1 for _, member, tp, _ in handled.log if member == "1" and tp in moved)
    print(f"revoke commit {'on' if revoke_commit else 'off'}: {duplicates} duplicates in one "
          f"join; the first member had handled {replayable} records of the partitions that "
          f"moved; {len(sent)} records")
    if revoke_commit:
        # Only records done above the watermark (out of order across lanes) may come again.
        assert duplicates <= first.executor.config.max_in_flight_per_partition * len(moved)
        assert duplicates <= replayable // 10
    else:
        assert duplicates >= replayable
