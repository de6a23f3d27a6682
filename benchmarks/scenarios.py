"""Scenarios the tests and the benchmarks share by design: one definition of a scenario, which
a test checks (tests/test_executor.py, tests/test_rebalancing.py) and a benchmark measures
(benchmarks/partition_pickup.py).

An executor run on a background thread and waiting for what it does (:class:`Running`,
:func:`wait_for`); rebalance members (a ShardedExecutor over a PriorityConsumer on a thread),
their listener calls and handled records, keyless traffic to chosen partitions, and the pickup
of partitions added under traffic. Nothing here measures or asserts a figure: the tests assert,
the benchmarks time. :class:`Running` and :func:`wait_for` live in ``benchmarks._running``
(no Kafka client there). Everything else in ``benchmarks/`` is the benchmarks' own (the ``_``
modules are their harness); a test imports it only when the benchmark itself is its subject
(docs: README, Layout).
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewPartitions
from kafka.future import Future

# Also the tests' (they were defined here first; benchmarks import benchmarks._running).
from benchmarks._running import Running, wait_for
from priority_kafka import PriorityConsumer, create_priority_topics, priority_topic
from priority_kafka.executor import ShardedExecutor

LEVELS = 3
QUICK_SESSIONS = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 1_000}
#: The metadata refresh of the added-partitions scenario: pickup is bounded by it + 5 s.
PICKUP_METADATA_MAX_AGE_MS = 2000


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
    """What the members' handlers saw: (time, member, partition, value), shared by members;
    and for each record its timestamp and when it was handled, both ``time.time()`` (with a
    topic of ``LogAppendTime``, how long it waited after the broker appended it)."""

    def __init__(self) -> None:
        self.log: list[tuple[float, str, TopicPartition, bytes]] = []
        self.stamped: list[tuple[TopicPartition, float, float]] = []
        self._lock = threading.Lock()

    def handler(self, member: str, delay_s: float = 0.0) -> Callable[[Any], None]:
        def handle(record: Any) -> None:
            if delay_s:
                time.sleep(delay_s)
            tp = TopicPartition(record.topic, record.partition)
            with self._lock:
                self.log.append((time.monotonic(), member, tp, record.value))
                self.stamped.append((tp, record.timestamp / 1000, time.time()))

        return handle

    def waits(self, tp: TopicPartition, start: float, end: float) -> list[tuple[float, float]]:
        """``(timestamp, seconds until handled)`` of each record of ``tp`` stamped within
        [start, end] (``time.time()`` seconds)."""
        with self._lock:
            return [(stamp, handled - stamp) for p, stamp, handled in self.stamped
                    if p == tp and start <= stamp <= end]

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


class OffCpu:
    """How long this process was kept off the CPUs: every 50 ms a thread notes the time it spent
    runnable but not running (Linux ``/proc`` schedstat; a wait for the GIL does not count).
    A starved process (load average 30 and more on two cores) stalls every thread alike, which
    no code of ours can prevent; ``between`` tells a test how much of a wait that was."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self._marks: list[tuple[float, float]] = []  # (time.time(), seconds off-CPU so far)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval_s,), daemon=True)
        self._thread.start()

    def _run(self, interval_s: float) -> None:
        path = f"/proc/self/task/{threading.get_native_id()}/schedstat"
        while True:
            with open(path) as stats:
                waited = int(stats.read().split()[1]) / 1e9
            self._marks.append((time.time(), waited))
            if self._stop.wait(interval_s):
                return

    def between(self, start: float, end: float) -> float:
        """Seconds off-CPU within [start, end] (``time.time()``), to the nearest marks."""
        marks = list(self._marks)
        times = [at for at, _ in marks]
        first = max(bisect.bisect_right(times, start) - 1, 0)
        last = min(bisect.bisect_left(times, end), len(marks) - 1)
        return max(0.0, marks[last][1] - marks[first][1]) if marks else 0.0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


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
        """Stop, wait until every record is acknowledged; what was sent. Once only."""
        if self._stop.is_set():
            return self.sent
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
        self.running = Running(self.executor)
        self.thread = self.running.thread

    def stop(self) -> None:
        self.running.stop(60)
        assert self.running.error is None, f"member {self.name} failed: {self.running.error!r}"


def added_partition_pickup(
    bootstrap: str, topic: str, group: str, levels: Sequence[int],
    start_member: Callable[..., Member] = Member,
) -> dict[str, Any]:
    """Add one partition to each of ``levels`` in turn while records flow to every partition,
    with one member (``metadata_max_age_ms`` = :data:`PICKUP_METADATA_MAX_AGE_MS`).

    Returns ``pickup_s`` (per level: seconds from ``create_partitions`` returning to the new
    partition's first record handled), ``longest_gap_s`` (per old partition, from the first
    add to the end of traffic) and ``records`` sent, once every one was handled.
    """
    create_priority_topics(bootstrap, topic, LEVELS, num_partitions=2)
    old = partitions_of(topic, 2)
    handled = Handled()
    traffic = Traffic(bootstrap, old, rate=20)
    member = None
    try:
        member = start_member("m", bootstrap, topic, group, handled,
                     metadata_max_age_ms=PICKUP_METADATA_MAX_AGE_MS, **QUICK_SESSIONS)
        wait_for(lambda: handled.partitions() == set(old), 40, "every partition handled")
        pickup: dict[int, float] = {}
        first_added = time.monotonic()
        for level in levels:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                admin.create_partitions({priority_topic(topic, level): NewPartitions(3)})
            finally:
                admin.close()
            added_at = time.monotonic()
            new = TopicPartition(priority_topic(topic, level), 2)
            traffic.add(new)
            limit = PICKUP_METADATA_MAX_AGE_MS / 1000 + 5 + 3
            wait_for(lambda new=new: handled.first_time(new) is not None, limit,
                     f"the partition added to level {level}")
            pickup[level] = handled.first_time(new) - added_at  # type: ignore[operator]
            more = added_at + pickup[level] + 2
            wait_for(lambda more=more: time.monotonic() > more, 10, "two more seconds of traffic")
        sent = traffic.stop()
        stopped_at = time.monotonic()
        wait_for(lambda: set(sent) <= set(handled.values()), 30, "every record sent")
    finally:
        traffic.stop()
        if member is not None and member.thread.is_alive():
            member.stop()
    return {
        "pickup_s": pickup,
        "longest_gap_s": {tp: handled.longest_gap(tp, first_added, stopped_at) for tp in old},
        "records": len(sent),
    }
