"""PriorityConsumer: confluent-kafka's Consumer, with priority levels and capacity burst.

A logical topic ``orders`` with ``max.priority`` 3 is the Kafka topics ``orders-0`` ..
``orders-2`` (2 the highest). One ``confluent_kafka.Consumer`` per level reads that level's
topics in group ``<group.id>-<level>``. Messages are served in *rounds* of ``max.poll.records``:
each round's per-level quotas come from :class:`~priority_kafka.CapacityBurst` (reserved split
plus burst), levels are served highest first, and each level's window records what it returned
in the round. ``consume(num_messages)`` with ``num_messages >= max.poll.records`` is one round,
exactly the kafka-python front-end's poll; smaller calls (``poll()`` included) take the next
messages of the current round, so the levels keep their shares however the caller batches.

Nothing is fetched into Python ahead of the caller: a level's consumer is asked, with
``consume(n, 0)``, only for what this call returns. So librdkafka's own offset store (which, with
``enable.auto.offset.store`` on, stores each message as ``consume`` hands it out) holds exactly
the returned messages, and its auto-commit, the commit before a rebalance and the one on
``close()`` never pass a message not returned.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from priority_kafka._checks import shown
from priority_kafka._levels import LevelFigures, LevelRouter, PriorityFront, capacity_burst
from priority_kafka._properties import INT, Source, load_properties, typed
from priority_kafka.burst import CapacityBurst, Round
from priority_kafka.confluent._added import RebalanceCallback, assign_callback
from priority_kafka.confluent._calls import LevelCalls
from priority_kafka.confluent._commits import commit_stored
from priority_kafka.confluent._config import (
    InvalidArgError,
    check_group_protocol,
    connection_config,
    cooperative,
    invalid_arg,
    level_prefetch,
    level_topic,
    merge,
    named_property,
    pop_own,
    split_config,
)
from priority_kafka.confluent._figures import RoundFigures
from priority_kafka.confluent._group import check_events, watches_fatal
from priority_kafka.confluent._login import LoginWatch
from priority_kafka.confluent._metadata import MetadataClients, check_level_topics, discover_levels
from priority_kafka.confluent._renewal import (
    LOST,
    BrokerWatch,
    Level,
    Renewals,
    serving,
    watch_statistics,
)
from priority_kafka.confluent._self_fence import SelfFences
from priority_kafka.confluent._waking import FetcherWaker
from priority_kafka.errors import IllegalStateError

__all__ = ["PriorityConsumer"]

# While nothing is available, consume() blocks on the highest level (a message there wakes it
# at once) for at most this long before checking the lower levels without blocking. Each check
# costs a few microseconds per level; the bound is how late a lower level's message can be.
_WAKE_S = 0.05
# confluent-kafka's own limit on num_messages.
_MAX_MESSAGES = 1_000_000


class PriorityConsumer(PriorityFront):
    """Consume priority topics with ``confluent_kafka.Consumer``'s API.

    ``PriorityConsumer({"bootstrap.servers": ..., "group.id": "billing", "max.priority": 3})``
    takes every librdkafka consumer property plus ``max.priority`` (required),
    ``max.poll.records`` (most messages per round and per ``consume()``, default 500),
    ``max.poll.history.window.size`` (6), ``min.poll.window.maxout.threshold`` (4) and
    ``max.poll.records.distributor`` (a callable ``(max_priority, max_poll_records) ->
    {level: quota}``, default :class:`~priority_kafka.ExponentialDistributor`). ``group.id``,
    ``client.id`` and ``group.instance.id`` get a ``-<level>`` suffix per level.

    Partition-level calls take priority-topic partitions (``TopicPartition("orders-2", 0)``) and
    go to the level that owns them. Like ``Consumer``, not thread-safe; see docs/confluent.md.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        self._config, librdkafka = split_config(merge(config, kwargs))
        self._router = LevelRouter(self._config.max_priority)
        check_group_protocol(librdkafka)
        # Only consumers that can be fenced for good look at every message for it.
        self._fatal_config = librdkafka if watches_fatal(librdkafka) else None
        self._fences = SelfFences.of(librdkafka, self._ask_renewal)
        self._burst = capacity_burst(self._config)
        self._reserved = self._burst.reserved
        self._max_messages = self._config.max_poll_records
        self._connection = connection_config(librdkafka)
        self._cooperative = cooperative(librdkafka)
        self._levels: list[Level] = []  # highest first, as the round's positions
        self._metadata = MetadataClients(self._levels, self._connection)
        # A refused login or an unreachable cluster: consume() raises it.
        self._login = LoginWatch.of(librdkafka)
        # Each level's statistics tell whether it lost every broker for good (see
        # confluent._renewal); the caller's stats_cb gets them too if it asked for them.
        stats_then = watch_statistics(librdkafka)
        try:
            prefetch = level_prefetch(
                len(self._reserved), self._config.fetch_buffer_bytes,
                typed("message.max.bytes", librdkafka.get("message.max.bytes", 1_000_000), INT),
            )
            for level in self._reserved:
                librdkafka["error_cb"] = self._login.error_cb()
                watch = BrokerWatch(functools.partial(self._ask_renewal, level, LOST), stats_then)
                librdkafka["stats_cb"] = watch
                librdkafka["logger"] = self._fences.logger(level, self._login.logger)
                with invalid_arg():
                    level_config = self._router.level_config(
                        librdkafka, level, "librdkafka", defaults=prefetch
                    )
                with named_property():
                    self._levels.append(Level(level, level_config, watch))
        except BaseException:
            for built in self._levels:
                built.consumer.close()
            raise
        self._by_level = {lv.level: lv for lv in self._levels}
        self._calls = LevelCalls(self._by_level, self._router, self._check_open)
        self._consumers = [lv.consumer for lv in self._levels]  # by round position
        self._renewals = Renewals(self._levels, self._consumers, self._cooperative)
        # A failure of a lower level's consume() after higher levels returned messages: those
        # are returned (librdkafka has stored their offsets), the failure on the next call.
        self._pending: BaseException | None = None
        # The level whose rebalance callback is running: assign() inside it is that level's.
        self._rebalancing: Level | None = None
        # Levels whose fetchers the next consume() wakes: librdkafka resumed their partitions
        # after a rebalance (see confluent._waking).
        self._waking: set[Level] = set()
        self._waker = FetcherWaker("priority-kafka-fetcher-waker")
        self._closed = False
        # The partitions paused through pause(), and the figures published as rounds end.
        self._paused: set[tuple[str, int]] = set()
        self._figures = RoundFigures(self._burst, self._router, lambda: self._round.quotas,
                                     self._paused)
        # Each round's messages per level: the reserved shares and the burst (burst.Round).
        self._round: Round[Message] = Round(
            self._burst, self._config.max_poll_records, self._ask, ended=self._figures.ended
        )

    @classmethod
    def from_properties(cls, properties: Source, **overrides: Any) -> PriorityConsumer:
        """Build from Java-style properties: a mapping or a ``.properties`` file's path (text
        values, as librdkafka takes its own: ``"max.priority": "3"`` is 3). ``overrides`` win."""
        return cls({**load_properties(properties), **overrides})

    @classmethod
    def for_topics(
        cls, config: Mapping[str, Any], topics: Sequence[str], **subscribe_kwargs: Any
    ) -> PriorityConsumer:
        """A PriorityConsumer of ``config`` subscribed to ``topics`` (``subscribe_kwargs`` are
        ``subscribe()``'s callbacks), with ``max.priority``, when not given, the number of
        levels the topics have on the broker (``_metadata.discover_levels``)."""
        given = merge(config, {})
        if pop_own(dict(given), "max.priority") is None:
            given["max.priority"] = discover_levels(connection_config(given), topics)
        consumer = cls(given)
        try:
            consumer.subscribe(topics, **subscribe_kwargs)
        except BaseException:
            consumer.close()
            raise
        return consumer

    # -- what PriorityConsumer adds ---------------------------------------------------------

    @property
    def burst(self) -> CapacityBurst:
        """The history windows and burst counts (read them; the consumer updates them)."""
        return self._burst

    @property
    def connection_config(self) -> dict[str, Any]:
        """The librdkafka properties given that say how to reach and authenticate to the
        cluster (``bootstrap.servers``, ``security.protocol``, ``ssl.*``, ``sasl.*``, ...): what
        another client of the same cluster needs, such as the dead-letter producer a
        :class:`~priority_kafka.ShardedExecutor` creates (a copy)."""
        return dict(self._connection)

    def priority_of(self, topic: str) -> int:
        """The priority level of a priority topic (``"orders-2"`` -> 2)."""
        return self._calls.level_of(topic).level

    @property
    def level_figures(self) -> Mapping[int, LevelFigures]:
        """Each level's figures as of the last ended round, highest level first: an immutable
        snapshot the consuming thread publishes, which any thread may read (no lock, no
        retry). ``records_prefetched`` and ``stalled_rebalances`` are always 0 here (nothing is
        fetched ahead of the caller; librdkafka rejoins by itself)."""
        return self._figures.current()

    def metrics(self) -> dict[int, dict[str, Any]]:
        """:attr:`level_figures` as dicts, keyed by level, as the kafka-python front-end's
        ``metrics()`` (without its ``"kafka"`` entry: librdkafka reports through
        ``stats_cb``)."""
        figures = self._figures.current()
        return {level: attrs.asdict(figures[level]) for level in figures}

    def renew_level(self, level: int, reason: str = "renew_level() was called") -> None:
        """Replace level ``level``'s consumer from the next ``consume()`` on: a new ``Consumer``
        of the same configuration, subscribed as the old one was. The old one's partitions are
        reported lost (``on_lost``, or ``on_revoke`` without it; an assign-style call inside
        that callback does nothing); its group gives them to the new consumer once the old
        member's session has timed out. The old consumer is closed on a daemon thread. A level
        that lost every broker (librdkafka issue #5301) or fenced itself (#3437) is renewed so
        by itself; the executor renews one whose commit did not return in time."""
        self._renewals.ask(self._calls.level(level), reason)

    def _ask_renewal(self, level: int, reason: str) -> None:  # from a librdkafka callback
        self._renewals.ask(self._by_level[level], reason)  # done by the next consume()

    def _forget(self, lv: Level, lost: list[TopicPartition]) -> None:
        self._waking.discard(lv)
        self._paused.difference_update((tp.topic, tp.partition) for tp in lost)

    # -- subscription and assignment --------------------------------------------------------

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Subscribe every level to its priority topics of the logical ``topics``.

        A name starting with ``^`` is a regex over whole logical topic names, as in librdkafka.
        The callbacks are called with this PriorityConsumer and one level's priority-topic
        partitions, from inside ``consume()``/``poll()``, as that level's group rebalances; an
        ``assign``/``incremental_assign`` made inside them applies to that level only.

        The levels are checked against the broker's topics first: a level topic at or above
        ``max.priority`` raises InvalidArgError naming it; a missing one MissingTopicsError
        naming it and how to create it, unless ``wait.for.topics`` (then a warning). For a
        regex only the first is checked (it may match topics created later).

        Deviation: a partition added to a level's topic after the level's first assignment,
        with no committed offset, is read from its start whatever ``auto.offset.reset`` says
        (its ``on_assign`` entry has ``OFFSET_BEGINNING``); librdkafka would skip what was
        produced to it before its metadata refresh noticed it.
        """
        self._check_open()
        if isinstance(topics, str) or not isinstance(topics, Sequence) or not all(
                isinstance(t, str) for t in topics):
            raise TypeError(f"'topics' must be a list of topic names (got {shown(topics)})")
        with invalid_arg():
            per_level = {
                lv.level: [level_topic(t, lv.level) for t in topics] for lv in self._levels
            }
        for callback in (on_assign, on_revoke, on_lost):
            if callback is not None and not callable(callback):
                raise TypeError(f"expected a callable rebalance callback (got {callback!r})")
        check_level_topics(self._metadata.other_than(self._rebalancing), topics, self.max_priority,
                           self._config.wait_for_topics, serving(self._levels, self._check_login))
        for lv in self._levels:
            # on_assign and on_revoke always, to wake the level's fetchers after each
            # rebalance; on_lost only when given (librdkafka calls on_revoke for it otherwise).
            callbacks = {
                "on_assign": assign_callback(
                    self._level_callback(lv, on_assign), self._cooperative,
                    functools.partial(self._metadata.partition_counts, lv),
                    lambda: self._closed,
                ),
                "on_revoke": self._level_callback(lv, on_revoke),
            }
            if on_lost is not None:
                callbacks["on_lost"] = self._level_callback(lv, on_lost)
            current = {event: self._renewals.current(lv, event, callback)
                       for event, callback in callbacks.items()}
            lv.consumer.subscribe(per_level[lv.level], **current)
            lv.subscription = (per_level[lv.level], current)

    def _level_callback(self, lv: Level, callback: RebalanceCallback | None) -> RebalanceCallback:
        def called(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            self._waking.add(lv)
            if callback is None:
                return
            self._rebalancing = lv
            try:
                callback(self, partitions)
            finally:
                self._rebalancing = None

        return called

    def unsubscribe(self) -> None:
        """Unsubscribe every level."""
        self._check_open()
        for lv in self._levels:
            lv.consumer.unsubscribe()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Assign priority-topic partitions, each to its level (in a rebalance callback: the
        rebalancing level's); outside a callback, levels given none are unassigned."""
        self._calls.assign(partitions, self._rebalancing, self._renewals.renewing)

    def incremental_assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Add priority-topic partitions to their levels' assignments."""
        if not self._renewals.renewing:
            self._calls.each("incremental_assign", partitions)

    def incremental_unassign(self, partitions: Iterable[TopicPartition]) -> None:
        """Remove priority-topic partitions from their levels' assignments."""
        if not self._renewals.renewing:
            self._calls.each("incremental_unassign", partitions)

    def unassign(self) -> None:
        """Drop every level's assignment (in a rebalance callback: the rebalancing level's)."""
        self._calls.unassign(self._rebalancing, self._renewals.renewing)

    def assignment(self) -> list[TopicPartition]:
        """Every level's assigned partitions, highest level first."""
        self._check_open()
        return [tp for lv in self._levels for tp in lv.consumer.assignment()]

    # -- consuming --------------------------------------------------------------------------

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to ``num_messages`` messages (at most ``max.poll.records``), highest priority first.

        Waits up to ``timeout`` seconds (-1: for ever) for at least one message. Error events
        come as messages with ``error()`` set, as from ``Consumer.consume``. A refused SASL
        login (two authentication errors of one level with no message in between) raises
        ``KafkaException`` (``_AUTHENTICATION``) instead of waiting on: a bare ``Consumer``
        retries it for ever and tells only ``error_cb`` (still called for every error). With
        ``group.protocol=consumer`` or ``group.instance.id``, a level's fatal error event (a
        static member fenced, KIP-848) comes back with ``fatal()`` true and a message saying
        what happened, and the next call raises it as ``KafkaException``.
        """
        self._check_open()
        if self._pending is not None:
            pending, self._pending = self._pending, None
            raise pending
        if (
            num_messages.__class__ is not int
            or not 0 < num_messages <= _MAX_MESSAGES
        ):
            raise ValueError(
                f"num_messages must be between 0 and {_MAX_MESSAGES} (1M) (got {num_messages!r})"
            )
        if self._renewals.due:
            self._renewals.run(self._forget)
        if self._waking:
            self._waker.wake_levels(self._waking, self._paused)
        budget = num_messages if num_messages < self._max_messages else self._max_messages
        messages = self._round.take(budget)
        if not messages and timeout != 0:
            messages = self._wait(budget, _seconds("timeout", timeout))
        if self._fatal_config is not None and messages:
            self._check_fatal(messages, self._fatal_config)
        login = self._login
        if login.count:
            if messages:
                login.clear()
            else:
                self._check_login()
        return messages

    def _check_login(self) -> None:
        """:meth:`LoginWatch.check`, closing every level first if the cluster is unreachable."""
        try:
            self._login.check()
        except KafkaException:
            if self._login.unreachable is not None:
                self.close()
            raise

    def _check_fatal(self, messages: list[Message], config: Mapping[str, Any]) -> None:
        """Fatal error events told clearly and raised by the next call (the level consumer
        returns nothing after one: waiting on would be for ever), but those of levels that
        fenced themselves, being replaced; levels whose commit read is never retried renewed
        (``_group.check_events``)."""
        messages[:] = self._fences.unfenced(messages)
        stop = check_events(self, messages, config)
        if stop is not None and self._pending is None:
            self._pending = stop

    def poll(self, timeout: float | None = None) -> Message | None:
        """The next message, highest priority first, or None after ``timeout`` seconds
        (None or -1: wait for ever)."""
        messages = self.consume(1, -1 if timeout is None else timeout)
        return messages[0] if messages else None

    def _ask(self, position: int, want: int, taken: list[Message]) -> list[Message] | None:
        """``want`` messages of the level at ``position`` without waiting; None if it failed
        after ``taken`` were taken (they are returned, the failure raised by the next call)."""
        try:
            return self._consumers[position].consume(want, 0)
        except BaseException as exc:
            if not taken:
                raise
            self._pending = exc
            return None

    def _wait(self, budget: int, timeout: float) -> list[Message]:
        """Block on the highest level with room in the round, checking the others every
        ``_WAKE_S``."""
        deadline = None if timeout < 0 else time.monotonic() + timeout
        alone = len(self._levels) == 1
        served = self._round
        while True:
            if deadline is None:
                wait = _WAKE_S
            else:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    return []
                if not alone and wait > _WAKE_S:
                    wait = _WAKE_S
            top = served.first()
            first = self._levels[top].consumer.consume(1, wait)
            if first:
                served.took(top, 1)
                return first + served.take(budget - 1) if budget > 1 else first
            messages = served.take(budget)
            if messages:
                return messages
            self._check_login()
            if self._renewals.due:
                self._renewals.run(self._forget)

    # -- offsets ----------------------------------------------------------------------------

    def commit(
        self,
        message: Message | None = None,
        offsets: Sequence[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | None:
        """Commit a message's offset + 1, the given offsets, or (neither) every level's stored
        offsets: those of the messages returned (with ``enable.auto.offset.store``, the default)
        or given to ``store_offsets``. Synchronous commits return the committed partitions."""
        self._check_open()
        if message is not None and offsets is not None:
            raise InvalidArgError("commit() takes a message or offsets, not both.")
        if message is not None:
            consumer = self._calls.level_of(message.topic()).consumer
            return consumer.commit(message=message, asynchronous=asynchronous)
        if offsets is None:
            committed = commit_stored(self._consumers, asynchronous)
        else:
            committed = []
            for level, group in self._calls.group(offsets).items():
                result = self._by_level[level].consumer.commit(
                    offsets=group, asynchronous=asynchronous
                )
                committed += result or []
        return None if asynchronous else committed

    def store_offsets(
        self, message: Message | None = None, offsets: Sequence[TopicPartition] | None = None
    ) -> None:
        """Store a message's offset + 1, or the given offsets, for the next commit."""
        self._check_open()
        if (message is None) == (offsets is None):
            raise InvalidArgError("store_offsets() takes a message or offsets, exactly one.")
        if message is not None:
            self._calls.level_of(message.topic()).consumer.store_offsets(message=message)
        else:
            self._calls.each("store_offsets", offsets or (), keyword="offsets")

    def committed(
        self, partitions: Sequence[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        """Committed offsets of priority-topic partitions, in the order given."""
        return self._calls.gather(partitions, lambda c, g: c.committed(g, timeout=timeout))

    def consumer_group_metadata(self, partition: TopicPartition) -> Any:
        """The group metadata of the level that consumes ``partition`` (in its group
        ``<group.id>-<level>``), for a transactional producer's
        ``send_offsets_to_transaction``."""
        return self._calls.level_of(partition.topic).consumer.consumer_group_metadata()

    def position(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        """Offsets of the next messages ``consume()`` returns, in the order given."""
        return self._calls.gather(partitions, lambda c, g: c.position(g))

    def offsets_for_times(
        self, partitions: Sequence[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        """Earliest offsets with timestamps at least the given ones (in ``offset``)."""
        return self._calls.gather(partitions, lambda c, g: c.offsets_for_times(g, timeout=timeout))

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int] | None:
        """Low and high watermarks of a priority-topic partition."""
        consumer = self._calls.level_of(partition.topic).consumer
        if timeout is None:
            return consumer.get_watermark_offsets(partition, cached=cached)
        return consumer.get_watermark_offsets(partition, timeout=timeout, cached=cached)

    def seek(self, partition: TopicPartition) -> None:
        """Move a priority-topic partition to ``partition.offset``."""
        self._calls.level_of(partition.topic).consumer.seek(partition)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop returning messages of these partitions until ``resume``."""
        partitions = list(partitions)
        self._calls.each("pause", partitions)
        self._paused.update((tp.topic, tp.partition) for tp in partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Return messages of paused partitions again."""
        partitions = list(partitions)
        self._calls.each("resume", partitions)
        self._paused.difference_update((tp.topic, tp.partition) for tp in partitions)

    # -- metadata and lifecycle -------------------------------------------------------------

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Cluster metadata (``ClusterMetadata``), of one Kafka topic or all."""
        self._check_open()
        return self._metadata.other_than(self._rebalancing).list_topics(topic, timeout)

    def cluster_id(self, timeout: float = -1) -> str:
        """The cluster's id."""
        self._check_open()
        return self._metadata.other_than(self._rebalancing).cluster_id(timeout)

    def close(self) -> None:
        """Close every level's consumer (each commits its stored offsets first with
        ``enable.auto.commit``, and leaves its group). Closing twice does nothing."""
        if self._closed:
            return
        self._closed = True
        self._renewals.due.clear()
        self._waker.close()  # no wake may run on a closing consumer
        errors: list[BaseException] = []
        for lv in self._levels:
            try:
                lv.consumer.close()
            except Exception as exc:
                errors.append(exc)
            lv.closed = True
        self._metadata.close()
        if errors:
            raise errors[0]

    def __enter__(self) -> PriorityConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"levels={[lv.level for lv in self._levels]}"
        return f"PriorityConsumer({state}, max_priority={self.max_priority})"

    def _check_open(self) -> None:
        if self._closed:
            # Closed because the cluster cannot be reached: every later call says why.
            raise self._login.unreachable or IllegalStateError("PriorityConsumer closed")


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds (got {shown(value)})")
    # NaN compares false with everything (the wait would never end); float() of a huge int
    # overflows.
    if (isinstance(value, int) and abs(value) > 2**53) or math.isnan(value):
        raise ValueError(f"{name} must be a number of seconds (got {shown(value)})")
    return float(value)

