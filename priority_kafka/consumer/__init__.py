"""PriorityConsumer: kafka-python's KafkaConsumer, with priority levels and capacity burst.

A logical topic ``orders`` with ``max_priority=3`` is the three Kafka topics ``orders-0``,
``orders-1`` and ``orders-2`` (2 is the highest priority). One kafka-python ``KafkaConsumer``
per level reads that level's topics in consumer group ``<group_id>-<level>``; each ``poll()``
splits ``max_poll_records`` across the levels (the distributor's reserved quotas, plus a
capacity burst for a busy level when others leave theirs unused) and returns the records
highest priority first.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from priority_kafka._checks import check_int, check_number
from priority_kafka._gc import gc_paused
from priority_kafka._kafka import (
    JOIN_POLL_MS,
    ConsumerRecord,
    Future,
    KafkaConsumer,
    KafkaIllegalStateError,
    OffsetAndMetadata,
    TopicPartition,
    honour_auto_create_setting,
    with_client_defaults,
)
from priority_kafka._levels import LevelFigures, LevelRouter, figures_of, publish
from priority_kafka._rebalance import ChainedListener, check_listener
from priority_kafka._types import Levels
from priority_kafka.burst import CapacityBurst, allocate
from priority_kafka.config import (
    PriorityConfig,
    connection_configs,
    split_configs,
)
from priority_kafka.consumer._commits import Commits
from priority_kafka.consumer._delivered import AutoCommitTimer, DeliveredOffsets
from priority_kafka.consumer._deserializing import Deserializers
from priority_kafka.consumer._level import Level, Records
from priority_kafka.consumer._polling import PollGate, PollTiming, RebalanceWatchdog
from priority_kafka.errors import ConfigError, DeserializationError, IllegalStateError
from priority_kafka.naming import level_pattern, priority_topic, split_priority_topic

__all__ = ["ConsumerClosedError", "ConsumerFactory", "PollTiming", "PriorityConsumer"]

#: Builds the kafka-python consumer of one level from its configs; tests may pass a fake.
ConsumerFactory = Callable[[int, dict[str, Any]], Any]

# Longest single wait on a lone active level (poll() loops until its own timeout).
_SINGLE_LEVEL_SLICE_MS = 60_000
#: Upper bound of ``auto_commit_interval_ms``: a longer interval is a mistake (turn
#: ``enable_auto_commit`` off instead), and an infinite one would silently never commit.
MAX_AUTO_COMMIT_MS = 3_600_000


class ConsumerClosedError(IllegalStateError, KafkaIllegalStateError):
    """A closed PriorityConsumer was used; also kafka-python's ``IllegalStateError``, so code
    written for ``KafkaConsumer`` catches the same thing."""


def _kafka_consumer(level: int, configs: dict[str, Any]) -> KafkaConsumer:
    return honour_auto_create_setting(KafkaConsumer(**configs))


def _topic_of(partition: TopicPartition) -> str:
    if not isinstance(partition, TopicPartition):
        raise TypeError(f"Expected a kafka.TopicPartition (got {partition!r}).")
    return partition.topic


def _by_partition(records: Iterable[ConsumerRecord]) -> Records:
    batches: Records = {}
    for record in records:
        batches.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
    return batches


class PriorityConsumer:
    """Consume priority topics with kafka-python's ``KafkaConsumer`` API.

    Args:
        *topics: logical topics to subscribe to (``"orders"`` means ``orders-0`` ..
            ``orders-<max_priority-1>``); none to subscribe or assign later.
        max_priority: number of priority levels (required; also accepted as ``max.priority``).
        max_poll_records: most records one ``poll()`` returns over all levels (default 500).
        max_poll_history_window_size: polls each level's history window remembers (default 6).
        min_poll_window_maxout_threshold: maxed-out polls in the window that make a level
            eligible to burst (default 4).
        max_poll_records_distributor: callable ``(max_priority, max_poll_records) -> {level:
            quota}``; default :class:`~priority_kafka.ExponentialDistributor`.
        consumer_factory: builds each level's consumer from ``(level, configs)``; the default
            is ``kafka.KafkaConsumer``. A seam for tests.
        poll_timing: the timing of the level polls (:class:`PollTiming`); a seam for tests.
        **configs: every kafka-python ``KafkaConsumer`` setting, by its Python name or its
            Java-style dotted name (``group.id``). ``group_id``, ``client_id`` and
            ``group_instance_id`` (static membership) become ``<value>-<level>`` for each
            level's consumer.

    Guarantees:
        * ``poll()`` returns at most ``max_poll_records`` (or ``max_records``) records, in a
          dict ordered from the highest priority level to the lowest; within a partition the
          records are in offset order, as kafka-python returns them.
        * Each level's reserved quota is its share of every poll; a level that maxed out its
          quota in ``min_poll_window_maxout_threshold`` of the last
          ``max_poll_history_window_size`` polls may borrow what the others left unused. A
          lender that has records again takes its share back at once: the borrower gives way
          in that poll (:func:`~priority_kafka.burst.allocate`), so every level with records
          gets at least its reserved share.
        * At-least-once, as kafka-python: what is committed (``commit()`` without offsets,
          and with ``enable_auto_commit``, the default, every ``auto_commit_interval_ms``
          from inside a later ``poll()``, before a rebalance and on ``close()``) is what
          ``poll()`` has returned, never a record it has not. Each level's consumer fetches
          several ``max_poll_records`` at a time and a ``poll()`` serves that level's quota
          out of them, so a level's kafka-python position runs ahead of what was returned;
          commits and ``position()`` use the returned offsets. A failure while polling one level (a
          broker error, a deserializer error) puts back everything that call had taken, so
          no record is skipped.
        * Rebalances happen per level (each level is its own consumer group) while ``poll()``
          runs. Records fetched but not returned for a revoked or lost partition are
          dropped and its position moved back to the first of them (kafka-python keeps the
          position of a partition assigned again). A rebalance listener passed to
          ``subscribe`` is called with that level's priority-topic partitions (by
          kafka-python 3 on its IO thread, while the polling thread waits inside ``poll()``).
          Partitions added to a subscribed topic are picked up after the next metadata
          refresh (``metadata_max_age_ms``).

    Deviations from ``KafkaConsumer``: ``subscription()`` returns logical topic names;
    ``metrics()`` is keyed by level; partition-level calls take priority-topic partitions
    (``TopicPartition("orders-2", 0)``). Like ``KafkaConsumer``, it is not thread-safe.
    """

    def __init__(
        self,
        *topics: str,
        consumer_factory: ConsumerFactory = _kafka_consumer,
        poll_timing: PollTiming | None = None,
        **configs: Any,
    ) -> None:
        self._config, kafka_configs = split_configs(configs)
        self._router = LevelRouter(self._config.max_priority)
        self._reserved = self._config.reserved_quotas()
        self._burst = CapacityBurst(
            self._reserved,
            window_size=self._config.max_poll_history_window_size,
            maxout_threshold=self._config.min_poll_window_maxout_threshold,
        )
        self._timing = poll_timing or PollTiming(join_wait_ms=JOIN_POLL_MS)
        self._iteration_timeout_ms = check_number(
            "consumer_timeout_ms",
            kafka_configs.get("consumer_timeout_ms", float("inf")),
            minimum=0,
            allow_inf=True,
        )
        # Auto-commit is done here, not by kafka-python: its positions include records fetched
        # ahead into the prefetch buffers, which were not returned yet.
        auto_commit = bool(kafka_configs.get("enable_auto_commit", True)) and (
            kafka_configs.get("group_id") is not None
        )
        interval_ms = kafka_configs.get("auto_commit_interval_ms", 5000)
        timer = AutoCommitTimer(
            check_number(
                "auto_commit_interval_ms", interval_ms, minimum=0, maximum=MAX_AUTO_COMMIT_MS
            ) / 1000
        )
        kafka_configs["enable_auto_commit"] = False
        # Deserialized here, not inside kafka-python (see _kafka.DESERIALIZER_ERROR_STOPS_POLL).
        self._deserialize = Deserializers(
            kafka_configs.pop("key_deserializer", None),
            kafka_configs.pop("value_deserializer", None),
        )
        session_timeout_ms = check_number(
            "session_timeout_ms", kafka_configs.get("session_timeout_ms", 45_000), minimum=1
        )
        self._bootstrap_servers = kafka_configs.get("bootstrap_servers", "localhost")
        self._connection = connection_configs(kafka_configs)
        self._delivered: DeliveredOffsets[TopicPartition] = DeliveredOffsets()
        self._levels: dict[int, Level] = {}  # highest first
        self._logical_topics: tuple[str, ...] = ()
        self._pattern: str | None = None
        self._assigned_levels: set[int] = set()
        # Records fetched for iteration and not yet yielded (undeserialized).
        self._iteration: deque[ConsumerRecord] = deque()
        self._flowing = False  # whether the last poll returned records
        self._idle_rounds = 0  # waits in a row that found nothing on any level
        self._closed = False
        try:
            for number in self._reserved:
                client = consumer_factory(number, self._level_configs(kafka_configs, number))
                self._levels[number] = Level(
                    number,
                    client,
                    PollGate(self._timing),
                    self._delivered,
                    auto_commit,
                    RebalanceWatchdog.for_session(session_timeout_ms),
                    **self._fetch_budget(kafka_configs),
                )
        except BaseException:
            self._close_levels()
            raise
        self._commits = Commits(
            self._levels, self._delivered, self._level_of, auto=auto_commit, timer=timer
        )
        self._publish()
        if topics:
            self.subscribe(topics)

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, Any], *topics: str, **overrides: Any
    ) -> PriorityConsumer:
        """Build from a Java-style properties mapping (``{"max.priority": 3, "group.id": ...}``)."""
        return cls(*topics, **{**properties, **overrides})

    # -- what PriorityConsumer adds ---------------------------------------------------------

    @property
    def max_priority(self) -> int:
        """Number of priority levels."""
        return self._config.max_priority

    @property
    def config(self) -> PriorityConfig:
        """The priority settings in force."""
        return self._config

    @property
    def reserved_quotas(self) -> dict[int, int]:
        """Each level's reserved share of ``max_poll_records``, highest level first."""
        return dict(self._reserved)

    @property
    def levels(self) -> Levels:
        """The priority levels, as :class:`~priority_kafka.ShardedExecutor` weighs them."""
        return Levels(self.reserved_quotas, self.priority_of)

    @property
    def bootstrap_servers(self) -> Any:
        """The ``bootstrap_servers`` setting every level's consumer uses."""
        return self._bootstrap_servers

    @property
    def connection_configs(self) -> dict[str, Any]:
        """The settings that reach and authenticate to the cluster (``bootstrap_servers``,
        ``security_protocol``, ``sasl_*``, ``ssl_*``, ...), for another client of it, such as
        the dead-letter producer a :class:`~priority_kafka.ShardedExecutor` creates."""
        return {"bootstrap_servers": self._bootstrap_servers, **self._connection}

    def priority_of(self, topic: str) -> int:
        """The priority level of a priority topic (``"orders-2"`` -> 2)."""
        return self._router.level_of(topic)

    # -- subscription and assignment --------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str = (),
        pattern: str | None = None,
        listener: Any = None,
    ) -> None:
        """Subscribe to logical topics (or a regex over logical topic names) on every level.

        Replaces any earlier subscription, as in kafka-python. ``listener`` (a kafka-python
        ``ConsumerRebalanceListener`` or ``AsyncConsumerRebalanceListener``) is called with
        the priority-topic partitions of each level as that level's group rebalances, after
        PriorityConsumer's own bookkeeping.
        """
        self._check_open()
        names = (topics,) if isinstance(topics, str) else tuple(topics)
        if bool(names) == (pattern is not None):
            raise ConfigError("subscribe() takes either topics or a pattern, not both or neither.")
        check_listener(listener)
        for number, level in self._levels.items():
            chain = ChainedListener(level, listener)
            if pattern is not None:
                level.client.subscribe(pattern=level_pattern(pattern, number), listener=chain)
            else:
                level.client.subscribe(
                    topics=[priority_topic(t, number) for t in names], listener=chain
                )
            level.gate.subscribed()
        self._logical_topics, self._pattern = names, pattern
        self._assigned_levels = set()

    def unsubscribe(self) -> None:
        """Unsubscribe every level from its topics and drop manual assignments."""
        self._check_open()
        self._commits.auto_commit_now()  # as kafka-python: no rebalance follows to commit them
        self._drop_buffered(rewind=False)
        self._delivered.clear()
        for level in self._levels.values():
            level.client.unsubscribe()
        self._logical_topics, self._pattern, self._assigned_levels = (), None, set()

    def subscription(self) -> set[str] | None:
        """The logical topics subscribed to (for a pattern: those it currently matches)."""
        self._check_open()
        if self._pattern is None:
            return set(self._logical_topics) or None
        matched: set[str] = set()
        for level in self._levels.values():
            matched.update(split_priority_topic(t)[0] for t in level.client.subscription() or ())
        return matched

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manually assign priority-topic partitions; each goes to its level's consumer."""
        self._check_open()
        by_level = self._group(partitions)
        self._commits.auto_commit_now()
        self._drop_buffered(rewind=True)
        self._delivered.keep({tp for group in by_level.values() for tp in group})
        for number, level in self._levels.items():
            if number in by_level:
                level.client.assign(list(by_level[number]))
            else:
                level.client.unsubscribe()
            level.gate.assigned_manually()
        self._logical_topics, self._pattern = (), None
        self._assigned_levels = set(by_level)

    def assignment(self) -> set[TopicPartition]:
        """All partitions currently assigned, over every level."""
        self._check_open()
        return set().union(*(level.client.assignment() for level in self._levels.values()))

    # -- polling ----------------------------------------------------------------------------

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None, update_offsets: bool = True
    ) -> Records:
        """Fetch records from every level, highest priority first.

        Blocks up to ``timeout_ms`` until at least one record is available. Waiting costs
        little CPU: it blocks on the highest level (so a high-priority record wakes it at once)
        and checks the lower levels every 100 ms, backing off to every 400 ms while nothing
        arrives anywhere (every 5 ms while records are flowing). Python's cyclic garbage
        collector is paused while the call decodes and hands out records (never while it
        waits, and left alone if the application disabled it); reference counting frees
        memory as usual, and the collection owed runs right after.

        Arguments:
            timeout_ms: milliseconds to wait when no record is buffered (0: do not wait).
            max_records: cap on the total for this call (default ``max_poll_records``); when
                the quotas exceed it, a bursting level gives way first, then the lowest levels.
            update_offsets: accepted for kafka-python's signature (internal there) and
                ignored: PriorityConsumer tracks what it returned itself.

        Returns:
            ``{TopicPartition: [ConsumerRecord, ...]}`` ordered by priority, highest first.

        Raises:
            DeserializationError: the first record of this poll could not be deserialized (a
                failure further in returns the records before it; the next poll raises). Seek
                past the record to skip it; nothing is committed past it otherwise.
        """
        # Decoding and buffering records is most of a poll's work; the collector would scan
        # the prefetched records again and again (Level.refill lets it run while it waits).
        with gc_paused():
            raw, quotas = self._collect(timeout_ms, max_records)
            records, rest, error = self._deserialize_all(raw)
            if rest:
                self._unread(rest)  # the failing record and everything after it come again
            if error is not None and not records:
                raise error
            self._account(records, quotas)
            for batch in records.values():
                self._mark_delivered(batch[-1])
        return records

    def _collect(
        self, timeout_ms: float, max_records: int | None
    ) -> tuple[Records, dict[int, int]]:
        """One poll's undeserialized records, and the quotas they were served under."""
        self._check_open()
        timeout_ms = check_number("timeout_ms", timeout_ms, minimum=0, allow_inf=True)
        if max_records is not None:
            max_records = check_int("max_records", max_records, minimum=1)
        self._put_back_iteration()
        # As kafka-python's: the caller is done with what the previous poll returned.
        self._commits.auto_commit_if_due()
        active = self._active_levels()
        total = max_records if max_records is not None else self._config.max_poll_records
        quotas = self._burst.quotas()
        deadline = time.monotonic() + timeout_ms / 1000
        records = self._poll_once(active, quotas, total, wait_ms=0)
        while not records:
            remaining_ms = (deadline - time.monotonic()) * 1000
            if remaining_ms <= 0:
                break
            wake_ms = self._timing.wake_ms(flowing=self._flowing, idle_rounds=self._idle_rounds)
            self._idle_rounds += 1
            # One level has nothing else to check, but it waits in bounded slices (timeout_ms
            # may be infinite).
            wait_ms = min(remaining_ms, _SINGLE_LEVEL_SLICE_MS if len(active) == 1 else wake_ms)
            records = self._poll_once(active, quotas, total, wait_ms=int(wait_ms) or 1)
        return records, quotas

    def _poll_once(
        self, active: Sequence[Level], quotas: Mapping[int, int], total: int, wait_ms: int
    ) -> Records:
        """Refill, allocate, take: one round over the levels, highest first.

        1. Refill: each level polls its consumer when its gate says so (its buffer is short of
           its share, it is joining, or it was not polled for a while); only the first level
           may block (``wait_ms``), so a high-priority record wakes the wait at once.
        2. Allocate: :func:`~priority_kafka.burst.allocate` splits ``total`` over what each
           level has buffered, under this poll's quotas.
        3. Take: each level's allocation, highest level first.

        Nothing is taken before every poll has returned, so a failing poll loses nothing.
        """
        chunk = self._timing.prefetch_polls * self._config.max_poll_records
        for index, level in enumerate(active):
            level.refill(
                wait_ms=wait_ms if index == 0 else 0,
                share=min(quotas[level.number], total),
                chunk=chunk,
            )
        admitted = allocate(
            {level.number: quotas[level.number] for level in active},
            {level.number: level.available() for level in active},
            total,
            self._burst.bursting_level,
        )
        records: Records = {}
        for level in active:
            if admitted[level.number]:
                records.update(level.take(admitted[level.number]))
        return records

    def _account(self, records: Records, quotas: dict[int, int]) -> None:
        """Feed what a poll returned to the burst windows and the metrics."""
        self._flowing = bool(records)
        if records:
            self._idle_rounds = 0
        counts = dict.fromkeys(self._levels, 0)
        for tp, batch in records.items():
            counts[self.priority_of(tp.topic)] += len(batch)
        self._burst.record(counts)
        for number, level in self._levels.items():
            level.last_quota = quotas[number]
            level.returned += counts[number]
        self._publish()

    def _publish(self) -> None:
        """Replace the levels' figures (one reference swap: other threads see the old or the
        new snapshot, never half of one)."""
        levels = self._levels.items()
        self._published = publish(
            self._burst,
            {number: level.last_quota for number, level in levels},
            {number: level.returned for number, level in levels},
            {number: len(level.buffer) for number, level in levels},
            {number: level.watchdog.stalls for number, level in levels},
            {number: len(level.client.paused()) for number, level in levels},
        )

    @property
    def level_figures(self) -> Mapping[int, LevelFigures]:
        """Each level's figures as of the last poll, highest level first: an immutable snapshot
        the polling thread publishes, which any thread may read (no lock, no retry)."""
        return figures_of(self._published)

    def _deserialize_all(
        self, raw: Records
    ) -> tuple[Records, Records, DeserializationError | None]:
        """The deserialized records before the first failure, the raw rest, and the failure."""
        if not self._deserialize.active:
            return raw, {}, None
        records: Records = {}
        rest: Records = {}
        error = None
        for tp, batch in raw.items():
            if error is not None:
                rest[tp] = batch
                continue
            done: list[ConsumerRecord] = []
            for index, record in enumerate(batch):
                try:
                    done.append(self._deserialize(record))
                except DeserializationError as exc:
                    error, rest[tp] = exc, batch[index:]
                    break
            if done:
                records[tp] = done
        return records, rest, error

    def _mark_delivered(self, last: ConsumerRecord) -> None:
        tp = TopicPartition(last.topic, last.partition)
        self._delivered.mark(tp, last.offset, last.leader_epoch)

    def _active_levels(self) -> list[Level]:
        # A pattern may match nothing yet: subscribed levels count as active regardless.
        subscribed = bool(self._logical_topics) or self._pattern is not None
        active = [
            level
            for number, level in self._levels.items()
            if subscribed or number in self._assigned_levels
        ]
        if not active:
            raise IllegalStateError(
                "PriorityConsumer is not subscribed to any topic nor assigned any partition."
            )
        return active

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        """Next record, highest priority first; stops after ``consumer_timeout_ms`` idle."""
        if self._closed:
            raise StopIteration("PriorityConsumer is closed")
        if not self._iteration:
            deadline = time.monotonic() + self._iteration_timeout_ms / 1000
            while not self._iteration:
                remaining_ms = (deadline - time.monotonic()) * 1000
                if remaining_ms <= 0:
                    raise StopIteration
                with gc_paused():  # as in poll()
                    batch, quotas = self._collect(min(remaining_ms, 1000), max_records=None)
                    self._account(batch, quotas)
                for part in batch.values():
                    self._iteration.extend(part)
        raw = self._iteration.popleft()
        try:
            record = self._deserialize(raw) if self._deserialize.active else raw
        except BaseException:
            self._iteration.appendleft(raw)
            raise
        # As kafka-python's iterator: the record in hand counts as consumed.
        self._mark_delivered(record)
        return record

    # -- prefetched records -----------------------------------------------------------------

    def _unread(self, records: Mapping[TopicPartition, Sequence[ConsumerRecord]]) -> None:
        """Put records taken from the levels back in front, in the same order."""
        for number, partitions in self._group(records).items():
            self._levels[number].unread({tp: records[tp] for tp in partitions})

    def _put_back_iteration(self) -> None:
        """Records fetched for iteration but not yet yielded go back to their levels' buffers.

        Called at the start of poll, seek, pause, position and the like, never from a
        rebalance hook, so the deque is only touched by the polling thread.
        """
        if self._iteration:
            batches = _by_partition(self._iteration)
            self._iteration.clear()
            self._unread(batches)

    def _drop_buffered(
        self, partitions: Iterable[TopicPartition] | None = None, *, rewind: bool
    ) -> None:
        """Forget the buffered records of ``partitions`` (None: of every partition)."""
        self._put_back_iteration()
        if partitions is None:
            for level in self._levels.values():
                level.drop(level.buffer.partitions(), rewind=rewind)
            return
        for number, group in self._group(partitions).items():
            self._levels[number].drop(group, rewind=rewind)

    # -- commits ----------------------------------------------------------------------------

    def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit offsets synchronously: the given ones, or what ``poll()`` has returned.

        Without ``offsets``, each assigned partition's offset after the last record returned
        (or the offset it was sought to): never past a record not yet returned.
        """
        self._check_open()
        self._commits.commit(offsets, timeout_ms)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
        callback: Callable[[dict[TopicPartition, OffsetAndMetadata], Any], None] | None = None,
    ) -> Future:
        """Commit asynchronously; ``callback(offsets, response_or_exception)`` is called once.

        As in kafka-python, the callback runs from inside a later ``poll()`` or ``commit()``;
        it runs when every level's commit has completed, with all levels' offsets merged and
        the first exception if any level failed. The returned future resolves as soon as the
        broker has answered every level (on kafka-python's IO threads, so it may be awaited in
        an ``AsyncConsumerRebalanceListener``); its value is the offsets given, or None.
        """
        self._check_open()
        return self._commits.commit_async(offsets, callback)

    def committed(self, partition: TopicPartition, metadata: bool = False) -> Any:
        """Last committed offset of a priority-topic partition (as kafka-python)."""
        return self._client_of(partition).committed(partition, metadata=metadata)

    def group_metadata(self, partition: TopicPartition) -> Any:
        """The membership (kafka-python's ``ConsumerGroupMetadata``) of the level that
        consumes ``partition`` in its group ``<group_id>-<level>``, for a transactional
        producer's ``send_offsets_to_transaction``."""
        return self._client_of(partition).group_metadata()

    # -- positions --------------------------------------------------------------------------

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int | None:
        """Offset of the next record ``poll()`` returns from ``partition``."""
        client = self._client_of(partition)
        self._put_back_iteration()
        first = self._levels[self._level_of(partition)].first_offset(partition)
        if first is not None:
            return first
        return client.position(partition, timeout_ms=timeout_ms)

    def highwater(self, partition: TopicPartition) -> int | None:
        """Last known high watermark of ``partition`` (None until fetched)."""
        return self._client_of(partition).highwater(partition)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Move ``partition``'s position: the next poll reads from ``offset``."""
        client = self._client_of(partition)
        self._drop_buffered({partition}, rewind=False)
        client.seek(partition, offset)
        # As kafka-python: a commit without offsets now commits the offset sought to.
        self._delivered.sought(partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Seek the given partitions (all assigned ones when none given) to their start."""
        self._seek_edge("seek_to_beginning", partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Seek the given partitions (all assigned ones when none given) to their end."""
        self._seek_edge("seek_to_end", partitions)

    def _seek_edge(self, method: str, partitions: Sequence[TopicPartition]) -> None:
        self._check_open()
        groups = self._group(partitions)
        moved = set(partitions) if partitions else self.assignment()
        self._drop_buffered(moved, rewind=False)
        self._delivered.forget(moved)  # its offset is known once records are returned
        if partitions:
            for number, group in groups.items():
                getattr(self._levels[number].client, method)(*group)
        else:
            for level in self._levels.values():
                if level.client.assignment():
                    getattr(level.client, method)()

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning records of these partitions until ``resume``; the group keeps them.

        Records already prefetched for them wait in order and come first after ``resume``.
        """
        self._check_open()
        groups = self._group(partitions)
        self._put_back_iteration()
        for number, group in groups.items():
            self._levels[number].client.pause(*group)

    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch again from paused partitions."""
        self._check_open()
        for number, group in self._group(partitions).items():
            self._levels[number].client.resume(*group)

    def paused(self) -> set[TopicPartition]:
        """Partitions paused on any level."""
        self._check_open()
        return set().union(*(level.client.paused() for level in self._levels.values()))

    # -- metadata ---------------------------------------------------------------------------

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """First offsets of priority-topic partitions."""
        return self._per_level("beginning_offsets", partitions, timeout_ms)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Offsets after the last record of priority-topic partitions."""
        return self._per_level("end_offsets", partitions, timeout_ms)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int | None = None
    ) -> dict[TopicPartition, Any]:
        """Earliest offsets whose timestamps are at least the given ones."""
        self._check_open()
        result: dict[TopicPartition, Any] = {}
        for number, group in self._group(timestamps).items():
            result.update(
                self._levels[number].client.offsets_for_times(
                    {tp: timestamps[tp] for tp in group}, timeout_ms=timeout_ms
                )
            )
        return result

    def _per_level(
        self, method: str, partitions: Iterable[TopicPartition], timeout_ms: int | None
    ) -> dict[TopicPartition, Any]:
        self._check_open()
        result: dict[TopicPartition, Any] = {}
        for number, group in self._group(partitions).items():
            client = self._levels[number].client
            result.update(getattr(client, method)(group, timeout_ms=timeout_ms))
        return result

    def topics(self) -> set[str]:
        """Every topic in the cluster the user may read (priority topics and others)."""
        self._check_open()
        return self._any_client().topics()

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition ids of a Kafka topic (a priority topic such as ``orders-2``)."""
        self._check_open()
        return self._any_client().partitions_for_topic(topic)

    def bootstrap_connected(self) -> bool:
        """True when every level's consumer is connected to a bootstrap server."""
        self._check_open()
        return all(level.client.bootstrap_connected() for level in self._levels.values())

    def metrics(self, raw: bool = False) -> dict[int, dict[str, Any]]:
        """Per level: the priority bookkeeping, and that level's kafka-python metrics.

        ``{level: {"reserved_quota", "last_quota", "window", "burst_count",
        "records_returned", "records_prefetched", "stalled_rebalances", "paused_partitions",
        "kafka": KafkaConsumer.metrics(raw)}}``, highest level first: :attr:`level_figures` as
        of the last poll, plus kafka-python's metrics now. ``stalled_rebalances`` counts the
        rejoins forced because the level's group stopped progressing for
        ``max(session_timeout_ms, 10 s)`` (each also logged as a warning naming the level).
        """
        self._check_open()
        figures = figures_of(self._published)
        return {
            number: {**attrs.asdict(figures[number]), "kafka": level.client.metrics(raw=raw)}
            for number, level in self._levels.items()
        }

    # -- lifecycle --------------------------------------------------------------------------

    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        """Close every level's consumer; with auto-commit (and ``autocommit``), commit first.

        What is committed is what ``poll()`` returned, as for ``commit()``; a failed commit
        is logged, as kafka-python does, and the records after it come again.
        """
        if self._closed:
            return
        if autocommit:
            self._commits.commit_on_close(timeout_ms)
        self._closed = True
        self._close_levels(timeout_ms=timeout_ms)

    def _close_levels(self, timeout_ms: int | None = None) -> None:
        # The level consumers never auto-commit (see __init__), and the revoke hooks that
        # kafka-python runs while closing commit nothing (close() did).
        for level in self._levels.values():
            level.closing = True
            level.client.close(autocommit=False, timeout_ms=timeout_ms)

    def __enter__(self) -> PriorityConsumer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        # As kafka-python: after an exception the record in hand may be unprocessed, so
        # leaving the block that way must not commit it.
        self.close(autocommit=exc_type is None)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"topics={sorted(self._logical_topics)!r}"
        return f"PriorityConsumer({state}, max_priority={self.max_priority})"

    # -- helpers ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("PriorityConsumer is closed.")

    def _level_of(self, partition: TopicPartition) -> int:
        return self._router.level_of(_topic_of(partition))

    def _client_of(self, partition: TopicPartition) -> Any:
        self._check_open()
        return self._levels[self._level_of(partition)].client

    def _any_client(self) -> Any:
        return next(iter(self._levels.values())).client

    def _group(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        return self._router.group(partitions, _topic_of)

    def _level_fetch_bytes(self, level_configs: Mapping[str, Any]) -> int:
        """A level's ``max_partition_fetch_bytes`` unless given: kafka-python's default once per
        level, within ``fetch_max_bytes``.

        One consumer of every level's partitions would fetch up to that much of each in one
        request; a level's consumer fetches only its own, so N levels sent N times the
        requests for the same records. At kafka-python's 1 MiB, three levels read 0.95 of a raw
        consumer's records per CPU-second; at 3 MiB, 0.98 (benchmarks.consumer_overhead).
        """
        defaults = KafkaConsumer.DEFAULT_CONFIG
        per_level = defaults["max_partition_fetch_bytes"] * self._config.max_priority
        return min(per_level, level_configs.get("fetch_max_bytes", defaults["fetch_max_bytes"]))

    def _fetch_budget(self, configs: Mapping[str, Any]) -> dict[str, Any]:
        """A level's share of ``fetch_buffer_bytes`` and the most bytes per partition it may
        set (none if the caller set ``max_partition_fetch_bytes``); see ``consumer._fetch``."""
        given = "max_partition_fetch_bytes" in configs
        return {
            "fetch_share": self._config.fetch_buffer_bytes // self._config.max_priority,
            "fetch_ceiling": None if given else self._level_fetch_bytes(
                with_client_defaults(configs)
            ),
        }

    def _level_configs(self, configs: dict[str, Any], level: int) -> dict[str, Any]:
        level_configs = self._router.level_config(
            with_client_defaults(configs), level, "kafka-python"
        )
        # Each level's consumer may return up to the whole budget when it bursts.
        level_configs["max_poll_records"] = self._config.max_poll_records
        # A consumer only reads: a missing level topic is not created by subscribing to it.
        level_configs.setdefault("allow_auto_create_topics", False)
        if "max_partition_fetch_bytes" not in configs:
            level_configs["max_partition_fetch_bytes"] = self._level_fetch_bytes(level_configs)
        return level_configs
