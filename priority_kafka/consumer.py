"""PriorityConsumer: kafka-python's KafkaConsumer, with priority levels and capacity burst.

A logical topic ``orders`` with ``max_priority=3`` is the three Kafka topics ``orders-0``,
``orders-1`` and ``orders-2`` (2 is the highest priority). One kafka-python ``KafkaConsumer``
per level reads that level's topics in consumer group ``<group_id>-<level>``; each ``poll()``
splits ``max_poll_records`` across the levels (the distributor's reserved quotas, plus a
capacity burst for a busy level when others leave theirs unused) and returns the records
highest priority first.
"""

from __future__ import annotations

import collections
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.consumer.subscription_state import (
    AsyncConsumerRebalanceListener,
    ConsumerRebalanceListener,
)
from kafka.future import Future
from kafka.structs import OffsetAndMetadata

from priority_kafka._checks import check_number
from priority_kafka._kafka_compat import release_parked_records
from priority_kafka.burst import CapacityBurst
from priority_kafka.config import PriorityConfig, split_configs
from priority_kafka.errors import ConfigError, IllegalStateError
from priority_kafka.naming import (
    level_group_id,
    level_pattern,
    priority_topic,
    split_priority_topic,
)
from priority_kafka.prefetch import PrefetchBuffer

__all__ = ["ConsumerFactory", "PriorityConsumer"]

Records = dict[TopicPartition, list[ConsumerRecord]]
#: Builds the kafka-python consumer of one level from its configs; tests may pass a fake.
ConsumerFactory = Callable[[int, dict[str, Any]], Any]

# While waiting for data, poll() blocks on the highest level (which wakes it at once) for at
# most this long before checking the lower levels again. Longer saves idle CPU (each
# kafka-python poll costs about a millisecond), shorter wakes lower levels sooner.
_IDLE_WAKE_MS = 100
# Right after a poll that returned records, lower levels are likely mid-fetch: check them soon.
_FLOWING_WAKE_MS = 5
# A level whose consumer had nothing is not polled again (without waiting) for this long: an
# empty kafka-python poll still costs a round trip to its IO thread, and in the common case
# (a backlog on one level, nothing on the others) every poll() would pay it for each idle level.
_QUIET_LEVEL_BACKOFF_S = 0.01
# Each level's consumer is asked for this many polls' worth (max_poll_records each) at a time.
# Every kafka-python poll() costs two round trips to its IO thread (coordinator check, fetch
# scheduling) however few records it returns; fetching ahead makes them rare. 4 measured best
# against 1 and 2 (benchmarks/consumer_overhead.py), for at most 5 * max_poll_records records
# waiting per level.
_PREFETCH_POLLS = 4
# kafka-python takes part in a group rebalance only inside poll(): every level's consumer is
# polled at least this often, also while its prefetched records cover its share or while the
# total leaves it nothing, so that a rebalance of its group never waits on it for long.
_LEVEL_POLL_INTERVAL_S = 1.0
# kafka-python 3.0 completes a group (re)join only inside a poll() that blocks long enough for
# the whole JoinGroup/SyncGroup exchange: a poll(0) loop never joins, and polls of 10-50 ms
# under load often time out mid-join and start over. A joining level gets one poll this long
# (it returns early only with records, so an empty joining level costs all of it).
_JOIN_WAIT_MS = 300
# How long a level that was assigned no partition keeps getting join time.
_EMPTY_ASSIGNMENT_GRACE_S = 5.0

log = logging.getLogger(__name__)


def _kafka_consumer(level: int, configs: dict[str, Any]) -> KafkaConsumer:
    return KafkaConsumer(**configs)


def _log_auto_commit_failure(offsets: Any, error: BaseException) -> None:
    log.warning("Auto offset commit of %s failed: %r", offsets, error)


def _apply(deserializer: Any, record: ConsumerRecord, data: bytes | None) -> Any:
    """Deserialize as kafka-python does: a ``Deserializer`` object or a plain callable."""
    if deserializer is None:
        return data
    if hasattr(deserializer, "deserialize"):
        return deserializer.deserialize(record.topic, record.headers, data)
    return deserializer(data)


class _LevelRebalanceListener(AsyncConsumerRebalanceListener):
    """Runs PriorityConsumer's bookkeeping, then the user's listener, for one level's rebalance.

    Asynchronous so that an ``AsyncConsumerRebalanceListener`` of the user's is awaited as
    kafka-python would await it; a synchronous one is simply called. kafka-python 3 runs these
    on its IO thread while the polling thread waits inside ``poll()``.
    """

    def __init__(self, owner: PriorityConsumer, level: int, user: Any) -> None:
        self._owner = owner
        self._level = level
        self._user = user

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        owner = self._owner
        owner._joined[self._level] = False
        offsets = owner._release(self._level, revoked)
        if offsets:
            # kafka-python's own pre-rebalance auto-commit, of what was returned instead of
            # what was fetched. A blocking commit() is refused on the IO thread; awaiting
            # commit_async completes it while the partitions are still ours.
            try:
                await owner._consumers[self._level].commit_async(offsets=offsets)
            except Exception:
                log.warning(
                    "Pre-rebalance offset commit of %s failed: their records after the last "
                    "commit will be delivered again.", offsets, exc_info=True,
                )
        await self._call_user("on_partitions_revoked", revoked)

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        # Evicted from the group (session expired): the user's listener learns it as "lost"
        # (kafka-python's default for it is on_partitions_revoked), so nothing commits for them.
        self._owner._joined[self._level] = False
        self._owner._release(self._level, lost)
        await self._call_user("on_partitions_lost", lost)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._owner._joined[self._level] = True
        # An empty assignment is often a join that raced the topic's metadata, and another
        # rejoin follows: keep giving it join time for a while (not forever: a member of a
        # group with fewer partitions than members legitimately gets nothing).
        self._owner._join_grace_until[self._level] = (
            0.0 if assigned else time.monotonic() + _EMPTY_ASSIGNMENT_GRACE_S
        )
        await self._call_user("on_partitions_assigned", assigned)

    async def _call_user(self, method: str, partitions: set[TopicPartition]) -> None:
        if self._user is not None:
            result = getattr(self._user, method)(partitions)
            if inspect.isawaitable(result):
                await result


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
        **configs: every kafka-python ``KafkaConsumer`` setting, by its Python name or its
            Java-style dotted name (``group.id``). ``group_id`` becomes ``<group_id>-<level>``
            and ``client_id`` becomes ``<client_id>-<level>`` for each level's consumer.

    Guarantees:
        * ``poll()`` returns at most ``max_poll_records`` (or ``max_records``) records, in a
          dict ordered from the highest priority level to the lowest; within a partition the
          records are in offset order, as kafka-python returns them.
        * Each level's reserved quota is its share of every poll; a level that maxed out its
          quota in ``min_poll_window_maxout_threshold`` of the last
          ``max_poll_history_window_size`` polls may borrow what the others left unused. Levels
          are served highest first within the total, so in the one poll where a lender has
          data again while a higher level is bursting, the lender may get less than its share.
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
        **configs: Any,
    ) -> None:
        self._config, kafka_configs = split_configs(configs)
        self._reserved = self._config.reserved_quotas()
        self._burst = CapacityBurst(
            self._reserved,
            window_size=self._config.max_poll_history_window_size,
            maxout_threshold=self._config.min_poll_window_maxout_threshold,
        )
        self._iteration_timeout_ms = float(kafka_configs.get("consumer_timeout_ms", float("inf")))
        # Auto-commit is done here, not by kafka-python: its positions include records fetched
        # ahead into the prefetch buffers, which were not returned yet.
        self._auto_commit = bool(kafka_configs.get("enable_auto_commit", True)) and (
            kafka_configs.get("group_id") is not None
        )
        interval_ms = kafka_configs.get("auto_commit_interval_ms", 5000)
        self._auto_commit_interval_s = (
            check_number("auto_commit_interval_ms", interval_ms, minimum=0) / 1000
        )
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval_s
        kafka_configs["enable_auto_commit"] = False
        # Deserialized here, not inside kafka-python: its poll() stops returning records after a
        # deserializer raises (kafka-python 3.0.12), while here a failure rewinds the poll.
        self._key_deserializer = kafka_configs.pop("key_deserializer", None)
        self._value_deserializer = kafka_configs.pop("value_deserializer", None)
        self._deserializing = (self._key_deserializer, self._value_deserializer) != (None, None)
        self._levels = list(self._reserved)  # highest first
        self._consumers: dict[int, Any] = {}
        self._logical_topics: tuple[str, ...] = ()
        self._pattern: str | None = None
        self._assigned_levels: set[int] = set()
        # Fetched, not yet returned: per level, and (undeserialized) for iteration.
        self._prefetched: dict[int, PrefetchBuffer[TopicPartition]] = {
            level: PrefetchBuffer() for level in self._levels
        }
        self._buffer: collections.deque[ConsumerRecord] = collections.deque()
        # Per partition, the offset after the last record returned (or the offset sought to):
        # what a commit without explicit offsets commits.
        self._delivered: dict[TopicPartition, OffsetAndMetadata] = {}
        self._last_quotas: dict[int, int] = dict.fromkeys(self._levels, 0)
        self._returned: dict[int, int] = dict.fromkeys(self._levels, 0)
        # Per level: False from the start of a group rebalance until its assignment arrives.
        self._joined: dict[int, bool] = dict.fromkeys(self._levels, True)
        self._join_grace_until: dict[int, float] = dict.fromkeys(self._levels, 0.0)
        self._quiet_until: dict[int, float] = dict.fromkeys(self._levels, 0.0)
        self._poll_due: dict[int, float] = dict.fromkeys(self._levels, 0.0)
        self._flowing = False  # whether the last poll returned records
        self._closed = False
        try:
            for level in self._levels:
                self._consumers[level] = consumer_factory(
                    level, self._level_configs(kafka_configs, level)
                )
        except BaseException:
            self._close_consumers()
            raise
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

    def priority_of(self, topic: str) -> int:
        """The priority level of a priority topic (``"orders-2"`` -> 2)."""
        _, level = split_priority_topic(topic)
        if level >= self.max_priority:
            raise ConfigError(
                f"Topic {topic!r} has priority {level}, outside [0, {self.max_priority})."
            )
        return level

    # -- subscription and assignment --------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str = (),
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | AsyncConsumerRebalanceListener | None = None,
    ) -> None:
        """Subscribe to logical topics (or a regex over logical topic names) on every level.

        Replaces any earlier subscription, as in kafka-python. ``listener`` is called with the
        priority-topic partitions of each level as that level's group rebalances.
        """
        self._check_open()
        names = (topics,) if isinstance(topics, str) else tuple(topics)
        if bool(names) == (pattern is not None):
            raise ConfigError("subscribe() takes either topics or a pattern, not both or neither.")
        listener_types = (ConsumerRebalanceListener, AsyncConsumerRebalanceListener)
        if listener is not None and not isinstance(listener, listener_types):
            raise ConfigError(
                "'listener' must be a kafka ConsumerRebalanceListener or "
                f"AsyncConsumerRebalanceListener (got {listener!r})."
            )
        level_topics = {level: [priority_topic(t, level) for t in names] for level in self._levels}
        for level, consumer in self._consumers.items():
            hook = _LevelRebalanceListener(self, level, listener)
            if pattern is not None:
                consumer.subscribe(pattern=level_pattern(pattern, level), listener=hook)
            else:
                consumer.subscribe(topics=level_topics[level], listener=hook)
        self._logical_topics, self._pattern = names, pattern
        self._assigned_levels = set()
        self._joined = dict.fromkeys(self._levels, False)

    def unsubscribe(self) -> None:
        """Unsubscribe every level from its topics and drop manual assignments."""
        self._check_open()
        self._auto_commit_now()  # as kafka-python: no rebalance follows to commit them
        self._drop_buffered(self._buffered_partitions(), rewind=False)
        self._delivered.clear()
        for consumer in self._consumers.values():
            consumer.unsubscribe()
        self._logical_topics, self._pattern, self._assigned_levels = (), None, set()

    def subscription(self) -> set[str] | None:
        """The logical topics subscribed to (for a pattern: those it currently matches)."""
        self._check_open()
        if self._pattern is None:
            return set(self._logical_topics) or None
        matched: set[str] = set()
        for consumer in self._consumers.values():
            matched.update(split_priority_topic(t)[0] for t in consumer.subscription() or ())
        return matched

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manually assign priority-topic partitions; each goes to its level's consumer."""
        self._check_open()
        by_level = self._group(partitions)
        self._auto_commit_now()
        self._drop_buffered(self._buffered_partitions(), rewind=True)
        kept = {tp for group in by_level.values() for tp in group}
        self._delivered = {tp: o for tp, o in self._delivered.items() if tp in kept}
        for level, consumer in self._consumers.items():
            if level in by_level:
                consumer.assign(list(by_level[level]))
            else:
                consumer.unsubscribe()
        self._logical_topics, self._pattern = (), None
        self._assigned_levels = set(by_level)
        self._joined = dict.fromkeys(self._levels, True)  # manual assignment has no group to join

    def assignment(self) -> set[TopicPartition]:
        """All partitions currently assigned, over every level."""
        self._check_open()
        return set().union(*(c.assignment() for c in self._consumers.values()))

    # -- polling ----------------------------------------------------------------------------

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None, update_offsets: bool = True
    ) -> Records:
        """Fetch records from every level, highest priority first.

        Blocks up to ``timeout_ms`` until at least one record is available. Waiting costs
        little CPU: it blocks on the highest level (so a high-priority record wakes it at once)
        and checks the lower levels every 100 ms (every 5 ms while records are flowing).

        Arguments:
            timeout_ms: milliseconds to wait when no record is buffered (0: do not wait).
            max_records: cap on the total for this call (default ``max_poll_records``); the
                levels are served highest first within it.
            update_offsets: accepted for kafka-python's signature (internal there) and
                ignored: PriorityConsumer tracks what it returned itself.

        Returns:
            ``{TopicPartition: [ConsumerRecord, ...]}`` ordered by priority, highest first.
        """
        raw, quotas = self._fetch(timeout_ms, max_records)
        try:
            records = raw
            if self._deserializing:
                records = {tp: list(map(self._deserialize, batch)) for tp, batch in raw.items()}
        except BaseException:
            # The failing record and everything after it in this poll come again next time.
            self._unread(raw)
            raise
        self._account(records, quotas)
        for batch in records.values():
            self._mark_delivered(batch[-1])
        return records

    def _fetch(
        self, timeout_ms: float, max_records: int | None
    ) -> tuple[Records, dict[int, int]]:
        """One poll's undeserialized records, and the quotas they were served under."""
        self._check_open()
        check_number("timeout_ms", timeout_ms, minimum=0)
        if max_records is not None and (
            isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1
        ):
            raise ValueError(f"'max_records' must be an integer >= 1 (got {max_records!r}).")
        self._rewind_buffer()
        # As kafka-python's: the caller is done with what the previous poll returned.
        if self._auto_commit and time.monotonic() >= self._next_auto_commit:
            self._auto_commit_now()
        active = self._active_levels()
        budget = max_records if max_records is not None else self._config.max_poll_records
        quotas = self._burst.quotas()
        deadline = time.monotonic() + timeout_ms / 1000
        records = self._poll_levels(active, quotas, budget, wait_ms=0)
        while not records and active:
            remaining_ms = (deadline - time.monotonic()) * 1000
            if remaining_ms <= 0:
                break
            wake_ms = _FLOWING_WAKE_MS if self._flowing else _IDLE_WAKE_MS
            wait_ms = remaining_ms if len(active) == 1 else min(remaining_ms, wake_ms)
            records = self._poll_levels(active, quotas, budget, wait_ms=int(wait_ms) or 1)
        return records, quotas

    def _account(self, records: Records, quotas: dict[int, int]) -> None:
        """Feed what a poll returned to the burst windows and the metrics."""
        self._flowing = bool(records)
        counts = dict.fromkeys(self._levels, 0)
        for tp, batch in records.items():
            counts[self.priority_of(tp.topic)] += len(batch)
        self._burst.record(counts)
        self._last_quotas = quotas
        for level, count in counts.items():
            self._returned[level] += count

    def _deserialize(self, record: ConsumerRecord) -> ConsumerRecord:
        return record._replace(
            key=_apply(self._key_deserializer, record, record.key),
            value=_apply(self._value_deserializer, record, record.value),
        )

    def _mark_delivered(self, last: ConsumerRecord) -> None:
        tp = TopicPartition(last.topic, last.partition)
        self._delivered[tp] = OffsetAndMetadata(last.offset + 1, "", last.leader_epoch)

    def _poll_levels(
        self,
        active: Sequence[int],
        quotas: Mapping[int, int],
        budget: int,
        wait_ms: int,
    ) -> Records:
        """One round over the levels, highest first; only the first may block (``wait_ms``).

        A level is served from its prefetch buffer. Its consumer is polled, for
        ``_PREFETCH_POLLS * max_poll_records``, when the buffer cannot cover the level's share
        (not again within ``_QUIET_LEVEL_BACKOFF_S`` if it had nothing), and at least every
        ``_LEVEL_POLL_INTERVAL_S`` regardless.
        """
        records: Records = {}
        try:
            for index, level in enumerate(active):
                limit = max(0, min(quotas[level], budget))  # 0: the total is spent
                buffer, consumer = self._prefetched[level], self._consumers[level]
                paused = consumer.paused() if buffer else ()
                wanted = limit > 0 and buffer.available(paused) < limit
                now = time.monotonic()
                timeout_ms = wait_ms if index == 0 else 0
                if not self._joined[level] or now < self._join_grace_until[level]:
                    timeout_ms = max(timeout_ms, _JOIN_WAIT_MS)
                if (
                    timeout_ms
                    or now >= self._poll_due[level]
                    or (wanted and now >= self._quiet_until[level])
                ):
                    release_parked_records(consumer)
                    chunk = _PREFETCH_POLLS * self._config.max_poll_records
                    fetched = consumer.poll(
                        timeout_ms=timeout_ms,
                        # A level polled only to keep up with its group takes little.
                        max_records=chunk if wanted else max(1, chunk - len(buffer)),
                    )
                    self._poll_due[level] = now + _LEVEL_POLL_INTERVAL_S
                    if not fetched:
                        self._quiet_until[level] = now + _QUIET_LEVEL_BACKOFF_S
                    buffer.extend(fetched)
                    paused = consumer.paused() if buffer else ()
                if limit:
                    for tp, part in buffer.take(limit, paused).items():
                        records[tp] = part
                        budget -= len(part)
        except BaseException:
            # Records already taken in this call would be skipped: put them back.
            self._unread(records)
            raise
        return records

    def _active_levels(self) -> list[int]:
        # A pattern may match nothing yet: subscribed levels count as active regardless.
        subscribed = bool(self._logical_topics) or self._pattern is not None
        active = [level for level in self._levels if subscribed or level in self._assigned_levels]
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
        if not self._buffer:
            deadline = time.monotonic() + self._iteration_timeout_ms / 1000
            while not self._buffer:
                remaining_ms = (deadline - time.monotonic()) * 1000
                if remaining_ms <= 0:
                    raise StopIteration
                batch, quotas = self._fetch(timeout_ms=min(remaining_ms, 1000), max_records=None)
                self._account(batch, quotas)
                for part in batch.values():
                    self._buffer.extend(part)
        raw = self._buffer.popleft()
        try:
            record = raw
            if self._deserializing:
                record = self._deserialize(raw)
        except BaseException:
            self._buffer.appendleft(raw)
            raise
        # As kafka-python's iterator: the record in hand counts as consumed.
        self._mark_delivered(record)
        return record

    # -- prefetched records -----------------------------------------------------------------

    def _unread(self, records: Mapping[TopicPartition, Sequence[ConsumerRecord]]) -> None:
        """Put records taken from the prefetch buffers back in front, in the same order."""
        for level, partitions in self._group(records).items():
            self._prefetched[level].unread({tp: records[tp] for tp in partitions})

    def _rewind_buffer(self) -> None:
        """Put records fetched for iteration but not yet yielded back into the prefetch buffers."""
        if self._buffer:
            batches: dict[TopicPartition, list[ConsumerRecord]] = {}
            for record in self._buffer:
                batches.setdefault(TopicPartition(record.topic, record.partition), []).append(
                    record
                )
            self._buffer.clear()
            self._unread(batches)

    def _buffered_partitions(self) -> set[TopicPartition]:
        self._rewind_buffer()
        return set().union(*(buffer.partitions() for buffer in self._prefetched.values()))

    def _drop_buffered(self, partitions: Iterable[TopicPartition], rewind: bool) -> None:
        """Forget the prefetched records of ``partitions``.

        With ``rewind``, each partition still assigned is sought back to its first dropped
        record: its kafka-python position is past them, and it keeps that position if it
        stays (or, in a rebalance, comes back).
        """
        self._rewind_buffer()
        for level, group in self._group(partitions).items():
            first = self._prefetched[level].drop(group)
            if rewind and first:
                consumer = self._consumers[level]
                assigned = consumer.assignment()
                for tp, offset in first.items():
                    if tp in assigned:
                        consumer.seek(tp, offset)

    def _release(self, level: int, partitions: set[TopicPartition]) -> dict[TopicPartition, Any]:
        """Partitions leave this consumer: drop their records; return what auto-commit owes."""
        if self._closed:
            return {}  # kafka-python revokes everything on close(); close() did the commit
        owed = self._delivered_offsets(level, partitions) if self._auto_commit else {}
        self._drop_buffered(partitions, rewind=True)
        for tp in partitions:
            self._delivered.pop(tp, None)
        return owed

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
        for level, level_offsets in self._commit_plan(offsets).items():
            self._consumers[level].commit(offsets=level_offsets, timeout_ms=timeout_ms)

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
        plan = {level: o for level, o in self._commit_plan(offsets).items() if o}
        combined = Future()
        if not plan:
            if callback is not None:
                callback({}, None)
            return combined.success(dict(offsets) if offsets is not None else None)
        lock = threading.Lock()
        merged: dict[TopicPartition, OffsetAndMetadata] = {}
        responses: list[Any] = []
        answers: list[Any] = []

        def first_error(results: list[Any]) -> BaseException | None:
            return next((r for r in results if isinstance(r, BaseException)), None)

        def level_called_back(
            level_offsets: dict[TopicPartition, OffsetAndMetadata], result: Any
        ) -> None:
            merged.update(level_offsets)
            responses.append(result)
            if len(responses) == len(plan) and callback is not None:
                error = first_error(responses)
                callback(dict(merged), error if error is not None else responses[-1])

        def level_answered(result: Any) -> None:
            # Each level's answer arrives on that level's own IO thread.
            with lock:
                answers.append(result)
                if len(answers) < len(plan):
                    return
            error = first_error(answers)
            if error is not None:
                combined.failure(error)
            else:
                combined.success(dict(offsets) if offsets is not None else None)

        for level, level_offsets in plan.items():
            future = self._consumers[level].commit_async(
                offsets=level_offsets, callback=level_called_back
            )
            future.add_both(level_answered)
        return combined

    def _commit_plan(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None
    ) -> dict[int, dict[TopicPartition, OffsetAndMetadata]]:
        if offsets is None:
            return {
                level: self._delivered_offsets(level)
                for level, c in self._consumers.items()
                if c.assignment()
            }
        plan: dict[int, dict[TopicPartition, OffsetAndMetadata]] = {}
        for tp, offset in offsets.items():
            plan.setdefault(self._level_of(tp), {})[tp] = offset
        return plan

    def _delivered_offsets(
        self, level: int, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The returned offsets of ``level``'s assigned partitions (of ``partitions`` only)."""
        assigned = self._consumers[level].assignment()
        if partitions is not None:
            assigned &= set(partitions)
        return {tp: offset for tp, offset in self._delivered.items() if tp in assigned}

    def _auto_commit_now(self) -> None:
        """With auto-commit, commit what was returned, asynchronously (failures are logged)."""
        if not self._auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval_s
        for level, offsets in self._commit_plan(None).items():
            if offsets:
                future = self._consumers[level].commit_async(offsets=offsets)
                future.add_errback(_log_auto_commit_failure, offsets)

    def committed(self, partition: TopicPartition, metadata: bool = False) -> Any:
        """Last committed offset of a priority-topic partition (as kafka-python)."""
        return self._owner(partition).committed(partition, metadata=metadata)

    # -- positions --------------------------------------------------------------------------

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int | None:
        """Offset of the next record ``poll()`` returns from ``partition``."""
        owner = self._owner(partition)
        self._rewind_buffer()
        first = self._prefetched[self._level_of(partition)].first_offsets().get(partition)
        if first is not None:
            return first
        return owner.position(partition, timeout_ms=timeout_ms)

    def highwater(self, partition: TopicPartition) -> int | None:
        """Last known high watermark of ``partition`` (None until fetched)."""
        return self._owner(partition).highwater(partition)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Move ``partition``'s position: the next poll reads from ``offset``."""
        owner = self._owner(partition)
        self._drop_buffered({partition}, rewind=False)
        owner.seek(partition, offset)
        # As kafka-python: a commit without offsets now commits the offset sought to.
        self._delivered[partition] = OffsetAndMetadata(offset, "", -1)

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
        for tp in moved:
            self._delivered.pop(tp, None)  # its offset is known once records are returned
        if partitions:
            for level, group in groups.items():
                getattr(self._consumers[level], method)(*group)
        else:
            for consumer in self._consumers.values():
                if consumer.assignment():
                    getattr(consumer, method)()

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning records of these partitions until ``resume``; the group keeps them.

        Records already prefetched for them wait in order and come first after ``resume``.
        """
        self._check_open()
        groups = self._group(partitions)
        self._rewind_buffer()
        for level, group in groups.items():
            self._consumers[level].pause(*group)

    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch again from paused partitions."""
        self._check_open()
        for level, group in self._group(partitions).items():
            self._consumers[level].resume(*group)

    def paused(self) -> set[TopicPartition]:
        """Partitions paused on any level."""
        self._check_open()
        return set().union(*(c.paused() for c in self._consumers.values()))

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
        for level, group in self._group(timestamps).items():
            result.update(
                self._consumers[level].offsets_for_times(
                    {tp: timestamps[tp] for tp in group}, timeout_ms=timeout_ms
                )
            )
        return result

    def _per_level(
        self, method: str, partitions: Iterable[TopicPartition], timeout_ms: int | None
    ) -> dict[TopicPartition, Any]:
        self._check_open()
        result: dict[TopicPartition, Any] = {}
        for level, group in self._group(partitions).items():
            result.update(getattr(self._consumers[level], method)(group, timeout_ms=timeout_ms))
        return result

    def topics(self) -> set[str]:
        """Every topic in the cluster the user may read (priority topics and others)."""
        self._check_open()
        return self._consumers[self._levels[0]].topics()

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition ids of a Kafka topic (a priority topic such as ``orders-2``)."""
        self._check_open()
        return self._consumers[self._levels[0]].partitions_for_topic(topic)

    def bootstrap_connected(self) -> bool:
        """True when every level's consumer is connected to a bootstrap server."""
        self._check_open()
        return all(c.bootstrap_connected() for c in self._consumers.values())

    def metrics(self, raw: bool = False) -> dict[int, dict[str, Any]]:
        """Per level: the priority bookkeeping, and that level's kafka-python metrics.

        ``{level: {"reserved_quota", "last_quota", "window", "burst_count",
        "records_returned", "records_prefetched", "kafka": KafkaConsumer.metrics(raw)}}``,
        highest level first.
        """
        self._check_open()
        windows = self._burst.windows
        bursts = self._burst.burst_counts
        return {
            level: {
                "reserved_quota": self._reserved[level],
                "last_quota": self._last_quotas[level],
                "window": list(windows[level]),
                "burst_count": bursts[level],
                "records_returned": self._returned[level],
                "records_prefetched": len(self._prefetched[level]),
                "kafka": self._consumers[level].metrics(raw=raw),
            }
            for level in self._levels
        }

    # -- lifecycle --------------------------------------------------------------------------

    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        """Close every level's consumer; with auto-commit (and ``autocommit``), commit first.

        What is committed is what ``poll()`` returned, as for ``commit()``; a failed commit
        is logged, as kafka-python does, and the records after it come again.
        """
        if self._closed:
            return
        if autocommit and self._auto_commit:
            for level, offsets in self._commit_plan(None).items():
                if offsets:
                    try:
                        self._consumers[level].commit(offsets=offsets, timeout_ms=timeout_ms)
                    except Exception:
                        log.warning("Offset commit of %s on close failed.", offsets, exc_info=True)
        self._closed = True
        self._close_consumers(timeout_ms=timeout_ms)

    def _close_consumers(self, timeout_ms: int | None = None) -> None:
        # The level consumers never auto-commit (see __init__).
        for consumer in self._consumers.values():
            consumer.close(autocommit=False, timeout_ms=timeout_ms)

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
            raise IllegalStateError("PriorityConsumer is closed.")

    def _level_of(self, partition: TopicPartition) -> int:
        if not isinstance(partition, TopicPartition):
            raise TypeError(f"Expected a kafka.TopicPartition (got {partition!r}).")
        return self.priority_of(partition.topic)

    def _owner(self, partition: TopicPartition) -> Any:
        self._check_open()
        return self._consumers[self._level_of(partition)]

    def _group(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        groups: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            groups.setdefault(self._level_of(tp), []).append(tp)
        return groups

    def _level_configs(self, configs: dict[str, Any], level: int) -> dict[str, Any]:
        level_configs = dict(configs)
        # Each level's consumer may return up to the whole budget when it bursts.
        level_configs["max_poll_records"] = self._config.max_poll_records
        if level_configs.get("group_id") is not None:
            level_configs["group_id"] = level_group_id(level_configs["group_id"], level)
        if level_configs.get("client_id") is not None:
            level_configs["client_id"] = f"{level_configs['client_id']}-{level}"
        return level_configs
