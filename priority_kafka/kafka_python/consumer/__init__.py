"""PriorityConsumer: kafka-python's KafkaConsumer, with priority levels and capacity burst.

A logical topic ``orders`` with ``max_priority=3`` is the three Kafka topics ``orders-0``,
``orders-1`` and ``orders-2`` (2 is the highest priority). One kafka-python ``KafkaConsumer``
per level reads that level's topics in consumer group ``<group_id>-<level>``; each ``poll()``
splits ``max_poll_records`` across the levels (the distributor's reserved quotas, plus a
capacity burst for a busy level when others leave theirs unused) and returns the records
highest priority first.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from priority_kafka._checks import check_int, check_number, shown
from priority_kafka._gc import gc_paused
from priority_kafka._levels import LevelFigures, PriorityFront, capacity_burst, figures_of
from priority_kafka._properties import Source, load_properties
from priority_kafka.config import connection_configs, normalize_keys
from priority_kafka.errors import ConfigError, IllegalStateError
from priority_kafka.kafka_python._kafka import (
    JOIN_POLL_MS,
    ConsumerRecord,
    Future,
    KafkaConsumer,
    KafkaIllegalStateError,
    OffsetAndMetadata,
    TopicPartition,
    cluster_topics,
    forget_earlier_offset_fetches,
    honour_auto_create_setting,
)
from priority_kafka.kafka_python._records import use_fast_records
from priority_kafka.kafka_python.consumer._calls import LevelCalls
from priority_kafka.kafka_python.consumer._commits import Commits
from priority_kafka.kafka_python.consumer._delivered import AutoCommitTimer, DeliveredOffsets
from priority_kafka.kafka_python.consumer._level import Records, close_levels, open_levels
from priority_kafka.kafka_python.consumer._polling import PollTiming
from priority_kafka.kafka_python.consumer._rounds import PollRounds
from priority_kafka.kafka_python.consumer._settings import ConsumerSettings
from priority_kafka.kafka_python.consumer._subscription import (
    Subscription,
    topic_names,
    with_discovered_levels,
)
from priority_kafka.kafka_python.consumer._unreturned import Unreturned
from priority_kafka.naming import check_subscription

__all__ = ["ConsumerClosedError", "ConsumerFactory", "PollTiming", "PriorityConsumer"]

#: Builds the kafka-python consumer of one level from its configs; tests may pass a fake.
ConsumerFactory = Callable[[int, dict[str, Any]], Any]


class ConsumerClosedError(IllegalStateError, KafkaIllegalStateError):
    """A closed PriorityConsumer was used; also kafka-python's ``IllegalStateError``, so code
    written for ``KafkaConsumer`` catches the same thing."""


_log = logging.getLogger("priority_kafka.consumer")  # its documented path's name


def _kafka_consumer(level: int, configs: dict[str, Any]) -> KafkaConsumer:
    consumer = forget_earlier_offset_fetches(honour_auto_create_setting(KafkaConsumer(**configs)))
    use_fast_records(consumer)  # the level deserializes nothing: we do, above it
    return consumer


class PriorityConsumer(PriorityFront):
    """Consume priority topics with kafka-python's ``KafkaConsumer`` API.

    Args:
        *topics: logical topics to subscribe to (``"orders"`` means ``orders-0`` ..
            ``orders-<max_priority-1>``); none to subscribe or assign later.
        max_priority: number of priority levels (also accepted as ``max.priority``). Optional
            when ``topics`` are given: then it is the number of levels they have on the
            broker (``orders-0`` .. ``orders-<N-1>``, contiguous; each topic as many).
        max_poll_records: most records one ``poll()`` returns over all levels (default 500).
        max_poll_history_window_size: polls each level's history window remembers (default 6).
        min_poll_window_maxout_threshold: maxed-out polls in the window that make a level
            eligible to burst (default 4).
        max_poll_records_distributor: callable ``(max_priority, max_poll_records) -> {level:
            quota}``; default :class:`~priority_kafka.ExponentialDistributor`.
        consumer_factory: builds each level's consumer from ``(level, configs)``; the default
            is ``kafka.KafkaConsumer``. A seam for tests.
        poll_timing: the timing of the level polls (:class:`PollTiming`); a seam for tests.
        topic_lister: returns every topic name of the cluster, for the check of the levels
            (default: a metadata request of a short-lived client); a seam for tests.
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
        topic_lister: Callable[[], Iterable[str]] | None = None,
        **configs: Any,
    ) -> None:
        topics = topic_names(topics)
        # Not a level's client: topics() on a level's kafka-python 3.0.12 consumer made
        # tests/test_consumer.py::test_restart_resumes_from_committed_offsets re-read records
        # committed before the restart (run after the tests before it; cause not found).
        self._list_topics = topic_lister or functools.partial(
            cluster_topics, connection_configs(normalize_keys(configs))
        )
        settings = ConsumerSettings.parse(
            with_discovered_levels(topics, configs, self._list_topics)
        )
        self._config, self._router = settings.config, settings.router
        self._burst = capacity_burst(self._config)
        self._reserved = self._burst.reserved
        self._timing = poll_timing or PollTiming(join_wait_ms=JOIN_POLL_MS)
        self._iteration_timeout_ms = settings.iteration_timeout_ms
        self._deserialize = settings.deserializers
        self._bootstrap_servers = settings.bootstrap_servers
        self._connection = settings.connection
        self._delivered: DeliveredOffsets[TopicPartition] = DeliveredOffsets()
        self._levels = open_levels(
            self._reserved,
            lambda number: consumer_factory(number, settings.level_configs(number)),
            timing=self._timing,
            delivered=self._delivered,
            auto_commit=settings.auto_commit,
            session_timeout_ms=settings.session_timeout_ms,
            **settings.fetch_budget(),
        )  # highest first
        self._closed = False
        self._calls = LevelCalls(self._levels, self._router)
        self._subscription = Subscription(self._levels)
        self._unreturned = Unreturned(self._levels, self._calls.group)
        self._commits = Commits(
            self._levels,
            self._delivered,
            self._calls.level_of,
            auto=settings.auto_commit,
            timer=AutoCommitTimer(settings.auto_commit_interval_s),
        )
        self._rounds = PollRounds(
            self._levels, self._burst, self._timing, self._config.max_poll_records,
            self._router.level_of,
        )
        if topics:
            self.subscribe(topics)

    @classmethod
    def from_properties(
        cls, properties: Source, *topics: str, **overrides: Any
    ) -> PriorityConsumer:
        """Build from Java-style properties: a mapping (``{"max.priority": 3, "group.id": ...}``)
        or the path of a ``.properties`` file. Values may be strings, as a file gives them
        (``"max.priority": "3"``): each becomes its setting's type. ``overrides`` win."""
        return cls(*topics, **{**load_properties(properties), **overrides})

    # -- what PriorityConsumer adds ---------------------------------------------------------

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

        The levels are checked against the broker's topics first: a level topic at or above
        ``max_priority`` (its records would never be read) raises ConfigError naming it; a
        missing level topic raises MissingTopicsError naming it and how to create it, unless
        ``wait_for_topics`` is set (then a warning names it). With a pattern, only the first
        is checked (a pattern may match topics created later).
        """
        self._check_open()
        names = topic_names(topics)
        if pattern is not None and not isinstance(pattern, str):
            raise ConfigError(f"'pattern' must be a str (got {shown(pattern)}).")
        if bool(names) != (pattern is not None):
            topic_list = self._list_topics()
            for warning in check_subscription(
                names, pattern, topic_list, self.max_priority, self._config.wait_for_topics
            ):
                _log.warning("%s; waiting for them (wait_for_topics)", warning)
        self._subscription.subscribe(names, pattern, listener)

    def unsubscribe(self) -> None:
        """Unsubscribe every level from its topics and drop manual assignments."""
        self._check_open()
        self._commits.auto_commit_now()  # as kafka-python: no rebalance follows to commit them
        self._unreturned.drop(rewind=False)
        self._delivered.clear()
        self._subscription.unsubscribe()

    def subscription(self) -> set[str] | None:
        """The logical topics subscribed to (for a pattern: those it currently matches)."""
        self._check_open()
        return self._subscription.logical_topics()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manually assign priority-topic partitions; each goes to its level's consumer."""
        self._check_open()
        by_level = self._group(partitions)
        self._commits.auto_commit_now()
        self._unreturned.drop(rewind=True)
        self._delivered.keep({tp for group in by_level.values() for tp in group})
        self._subscription.assign(by_level)

    def assignment(self) -> set[TopicPartition]:
        """All partitions currently assigned, over every level."""
        self._check_open()
        return self._calls.union("assignment")

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
            records, rest, error = self._deserialize.split(raw)
            if rest:
                # The failing record and everything after it come again.
                self._unreturned.unread(rest)
            if error is not None and not records:
                raise error
            self._rounds.account(records, quotas)
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
        self._unreturned.put_back_iteration()
        # As kafka-python's: the caller is done with what the previous poll returned.
        self._commits.auto_commit_if_due()
        active = self._subscription.active()
        total = max_records if max_records is not None else self._config.max_poll_records
        return self._rounds.collect(active, timeout_ms, total)

    @property
    def level_figures(self) -> Mapping[int, LevelFigures]:
        """Each level's figures as of the last poll, highest level first: an immutable snapshot
        the polling thread publishes, which any thread may read (no lock, no retry)."""
        return figures_of(self._rounds.published)

    def _mark_delivered(self, last: ConsumerRecord) -> None:
        tp = TopicPartition(last.topic, last.partition)
        self._delivered.mark(tp, last.offset, last.leader_epoch)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        """Next record, highest priority first; stops after ``consumer_timeout_ms`` idle."""
        if self._closed:
            raise StopIteration("PriorityConsumer is closed")
        iteration = self._unreturned.iteration
        if not iteration:
            deadline = time.monotonic() + self._iteration_timeout_ms / 1000
            while not iteration:
                remaining_ms = (deadline - time.monotonic()) * 1000
                if remaining_ms <= 0:
                    raise StopIteration
                with gc_paused():  # as in poll()
                    batch, quotas = self._collect(min(remaining_ms, 1000), max_records=None)
                    self._rounds.account(batch, quotas)
                for part in batch.values():
                    iteration.extend(part)
        raw = iteration.popleft()
        try:
            record = self._deserialize(raw) if self._deserialize.active else raw
        except BaseException:
            iteration.appendleft(raw)
            raise
        # As kafka-python's iterator: the record in hand counts as consumed.
        self._mark_delivered(record)
        return record

    # -- commits ----------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
               timeout_ms: int | None = None) -> None:
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

    def committed(
        self, partition: TopicPartition, metadata: bool = False, timeout_ms: int | None = None
    ) -> Any:
        """Last committed offset of a priority-topic partition (as kafka-python: blocks until
        the level's coordinator answers, or raises ``KafkaTimeoutError`` after ``timeout_ms``)."""
        return self._consumer_of(partition).committed(partition, metadata, timeout_ms)

    def group_metadata(self, partition: TopicPartition) -> Any:
        """The membership (kafka-python's ``ConsumerGroupMetadata``) of the level that
        consumes ``partition`` in its group ``<group_id>-<level>``, for a transactional
        producer's ``send_offsets_to_transaction``."""
        return self._consumer_of(partition).group_metadata()

    # -- positions --------------------------------------------------------------------------

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int | None:
        """Offset of the next record ``poll()`` returns from ``partition``."""
        client = self._consumer_of(partition)
        self._unreturned.put_back_iteration()
        first = self._levels[self._calls.level_of(partition)].first_offset(partition)
        if first is not None:
            return first
        return client.position(partition, timeout_ms=timeout_ms)

    def highwater(self, partition: TopicPartition) -> int | None:
        """Last known high watermark of ``partition`` (None until fetched)."""
        return self._consumer_of(partition).highwater(partition)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Move ``partition``'s position: the next poll reads from ``offset``."""
        client = self._consumer_of(partition)
        self._unreturned.drop({partition}, rewind=False)
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
        self._group(partitions)  # checked before anything moves
        moved = set(partitions) if partitions else self.assignment()
        self._unreturned.drop(moved, rewind=False)
        self._delivered.forget(moved)  # its offset is known once records are returned
        if partitions:
            self._calls.each(method, partitions)
        else:
            self._calls.each_assigned(method)

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning records of these partitions until ``resume``; the group keeps them.

        Records already prefetched for them wait in order and come first after ``resume``.
        """
        self._check_open()
        self._group(partitions)  # checked before anything moves
        self._unreturned.put_back_iteration()
        self._calls.each("pause", partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch again from paused partitions."""
        self._check_open()
        self._calls.each("resume", partitions)

    def paused(self) -> set[TopicPartition]:
        """Partitions paused on any level."""
        self._check_open()
        return self._calls.union("paused")

    # -- metadata ---------------------------------------------------------------------------

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """First offsets of priority-topic partitions."""
        self._check_open()
        return self._calls.merged("beginning_offsets", partitions, timeout_ms=timeout_ms)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Offsets after the last record of priority-topic partitions."""
        self._check_open()
        return self._calls.merged("end_offsets", partitions, timeout_ms=timeout_ms)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int | None = None
    ) -> dict[TopicPartition, Any]:
        """Earliest offsets whose timestamps are at least the given ones."""
        self._check_open()
        return self._calls.merged("offsets_for_times", timestamps, timeout_ms=timeout_ms)

    def topics(self) -> set[str]:
        """Every topic in the cluster the user may read (priority topics and others)."""
        self._check_open()
        return self._calls.any_consumer().topics()

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition ids of a Kafka topic (a priority topic such as ``orders-2``)."""
        self._check_open()
        return self._calls.any_consumer().partitions_for_topic(topic)

    def bootstrap_connected(self) -> bool:
        """True when every level's consumer is connected to a bootstrap server."""
        self._check_open()
        return all(level.consumer.bootstrap_connected() for level in self._levels.values())

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
        figures = figures_of(self._rounds.published)
        return {
            number: {**attrs.asdict(figures[number]), "kafka": level.consumer.metrics(raw=raw)}
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
        close_levels(self._levels, timeout_ms=timeout_ms)

    def __enter__(self) -> PriorityConsumer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        # As kafka-python: after an exception the record in hand may be unprocessed, so
        # leaving the block that way must not commit it.
        self.close(autocommit=exc_type is None)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"topics={sorted(self._subscription.topics)!r}"
        return f"PriorityConsumer({state}, max_priority={self.max_priority})"

    # -- helpers ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("PriorityConsumer is closed.")

    def _consumer_of(self, partition: TopicPartition) -> Any:
        self._check_open()
        return self._calls.consumer_of(partition)

    def _group(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        return self._calls.group(partitions)
