"""ShardedExecutor on confluent-kafka: the confluent family's adapter to the executor's client.

``ShardedExecutor(consumer, handler)`` with a confluent :class:`PriorityConsumer` (or a plain
``confluent_kafka.Consumer``, as one level) drives it through :class:`ConfluentClient`, which
``priority_kafka.executor._clients.as_client`` picks; no wrapping by hand. The adapter turns
messages into :class:`Record` objects keyed by ``kafka.TopicPartition``, runs the executor's
rebalance listener (coroutines) to completion inside ``poll()``, on the polling thread, from
confluent's ``on_assign``/``on_revoke``/``on_lost`` callbacks, and builds the dead-letter
producer (:class:`DeadLetterProducer`).

The consumer must be created with ``"enable.auto.commit": False``: the executor commits only
what its handlers finished, and librdkafka's auto-commit would commit what ``poll()`` returned.

**Pausing.** librdkafka's ``pause()`` throws away the partition's prefetched messages, and after
``resume()`` its fetcher asks the broker again only when its broker thread next wakes up (up to
about a second later when nothing else wakes it): an executor that pauses and resumes a busy
partition every few hundred records (``max_in_flight_per_partition``) idled most of the time
(0.7 of kafka-python's rate at 8 shards in ``benchmarks.executor_seed``). So ``pause()`` here is
the executor's pause: ``poll()`` stops returning the partition's records and keeps the ones
the consumer still hands out (*parks* them, in order, as kafka-python keeps a paused
partition's fetched records); only once its share of ``park_bytes`` of keys and values is
parked (1 MiB over the paused partitions: a lone partition may park 1 MiB, like kafka-python's
``max_partition_fetch_bytes``) is the partition paused in librdkafka too, which bounds the
memory. ``resume()`` returns the parked records first. (1 MiB per partition parked 58 MB of
Python objects for 12 paused partitions of 100 B records: ``benchmarks.executor_memory``.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentPartition

from priority_kafka._structs import OffsetAndMetadata, TopicPartition
from priority_kafka._types import (
    ONE_LEVEL,
    Answered,
    DeadLetterSender,
    Levels,
    MetadataTooLarge,
    PendingCommit,
)
from priority_kafka.config import COMMITTED_TIMEOUT_MS, DEFAULT_COMMIT_TIMEOUT_MS
from priority_kafka.confluent._bounded import BlockingCall, close_within
from priority_kafka.confluent._commit_reads import unretried_commit_read
from priority_kafka.confluent._commits import committed_offsets
from priority_kafka.confluent._dead_letters import confluent_dead_letters
from priority_kafka.confluent._records import Record
from priority_kafka.confluent._transactions import ConfluentTransactions, confluent_offsets
from priority_kafka.confluent.consumer import PriorityConsumer
from priority_kafka.errors import ConfigError

__all__ = ["ConfluentClient"]

log = logging.getLogger(__name__)

#: Non-fatal error events after which librdkafka does not go on by itself: the executor stops
#: on them, as kafka-python raises its counterparts (authorization errors, an offset out of
#: range without a reset policy).
_STOPPING_ERRORS = frozenset({
    # A fatal error's event has fatal() false; the consumer returns nothing after it.
    KafkaError._FATAL,
    KafkaError._AUTO_OFFSET_RESET,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
})


class _Completed:
    """An awaitable that is already done: the outcome of a commit made synchronously."""

    __slots__ = ("_error", "_result")

    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        self._result = result
        self._error = error

    def __await__(self) -> Generator[Any, None, Any]:
        if self._error is not None:
            raise self._error
        return self._result
        yield  # a generator, as __await__ must return an iterator


#: Keys and values the paused partitions may have parked, together, before they are paused in
#: librdkafka too (each its share: this over the partitions paused).
PARK_BYTES = 1024 * 1024
#: A partition resumed in librdkafka that has returned nothing for this long is sought to its
#: position (see ``ConfluentClient._refetch``): far past a fetch's round trip (2-5 ms), far
#: below librdkafka's default fetch back-off (1 s).
REFETCH_AFTER_S = 0.2


def _raise_too_large(error: KafkaError, exc: KafkaException) -> None:
    if error.code() == KafkaError.OFFSET_METADATA_TOO_LARGE:
        raise MetadataTooLarge(error.str()) from exc


def _size(record: Record) -> int:
    return max(0, record.serialized_key_size) + max(0, record.serialized_value_size)


def _to_kafka(partitions: Iterable[ConfluentPartition]) -> set[TopicPartition]:
    return {TopicPartition(tp.topic, tp.partition) for tp in partitions}


def _to_confluent(partitions: Iterable[TopicPartition]) -> list[ConfluentPartition]:
    return [ConfluentPartition(tp.topic, tp.partition) for tp in partitions]


class ConfluentClient:
    """A ``confluent_kafka.Consumer`` (or confluent PriorityConsumer) in kafka-python's shape.

    ``poll(timeout_ms, max_records)`` returns ``{kafka.TopicPartition: [Record, ...]}``;
    ``max_records`` defaults to ``max_poll_records`` (500). An error event the consumer cannot
    get past by itself (a fatal error, an authorization failure, an offset out of range with
    ``auto.offset.reset=error``) raises ``KafkaException`` from the next poll, once the records
    that came with it are returned; the others are librdkafka reporting what it recovers from
    on its own (a subscribed topic that does not exist yet, a broker down) and are logged as
    warnings, as kafka-python logs them; a partition EOF is skipped. A refused SASL login
    raises from a confluent PriorityConsumer's ``consume()``, so from ``poll()``; a bare
    ``Consumer`` retries it for ever and tells only its ``error_cb``. A poll returns as soon as
    it has a record, as kafka-python's does (``consume(n, timeout)`` would wait for ``n``). A
    paused partition's records that the consumer still returns are parked (``park_bytes`` of
    keys and values, plus one poll's, over the paused partitions, before a partition is paused
    in librdkafka too) and returned first after ``resume()`` (see the module's docstring).
    A level whose assigned partitions' commit read librdkafka never retries is renewed
    (:mod:`._commit_reads`). ``commit()`` and ``close()`` wait at most
    ``commit_timeout_ms`` for librdkafka (see :mod:`priority_kafka.confluent._bounded`); a
    PriorityConsumer's level whose commit is still blocked then is renewed
    (``PriorityConsumer.renew_level``). Like the consumer, use it from one thread.
    """

    def __init__(
        self,
        consumer: Consumer | PriorityConsumer,
        max_poll_records: int | None = None,
        park_bytes: int = PARK_BYTES,
        commit_timeout_ms: int = DEFAULT_COMMIT_TIMEOUT_MS,
    ) -> None:
        self._consumer = consumer
        self._commit_timeout_s = commit_timeout_ms / 1000
        # Per level (a plain Consumer's only one is 0): a level whose commit is left blocked
        # is renewed (see _bounded_commit) and gets a new one.
        self._commit_calls: dict[int, BlockingCall] = {}
        if max_poll_records is None:
            max_poll_records = (
                consumer.config.max_poll_records if isinstance(consumer, PriorityConsumer)
                else 500
            )
        self._max_poll_records = max_poll_records
        self._park_bytes = park_bytes
        self._topics: list[str] = []
        # Paused for the executor; the subset also paused in librdkafka; records held back.
        self._paused: set[TopicPartition] = set()
        self._held: set[TopicPartition] = set()
        # Resumed in librdkafka, and when, until librdkafka returns one of their messages.
        self._resumed: dict[TopicPartition, float] = {}
        self._parked: dict[TopicPartition, list[Record]] = {}
        self._parked_bytes: dict[TopicPartition, int] = {}
        self._revoking: frozenset[TopicPartition] = frozenset()  # in on_revoke/on_lost
        # Revoked or lost during the consume() call under way (True: assigned again after);
        # during this poll.
        self._rebalanced: dict[TopicPartition, bool] = {}
        self._gone: set[TopicPartition] = set()
        self._pending: KafkaException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def consumer(self) -> Consumer | PriorityConsumer:
        """The wrapped confluent consumer."""
        return self._consumer

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Record]]:
        """Messages grouped by partition, each partition's in offset order: parked records of
        resumed partitions first, then what the consumer returns (within ``max_records``)."""
        self._check_usable()
        if self._pending is not None:
            pending, self._pending = self._pending, None
            raise pending
        budget = max_records or self._max_poll_records
        batch = self._unpark(budget) if self._parked else {}
        wanted = budget - sum(map(len, batch.values())) if batch else budget
        if wanted <= 0:
            return batch
        timeout = 0.0 if batch else max(0.0, timeout_ms / 1000)
        messages = self._consume(wanted, timeout)
        if self._gone:
            # The parked records taken above are of partitions revoked since: not ours.
            for revoked in self._gone:
                batch.pop(revoked, None)
            self._gone = set()
        parked, parked_bytes = self._parked, self._parked_bytes
        # Messages come in runs of one partition: the run's key and list serve all its records
        # (a TopicPartition per message was a tenth of the polling thread's time at 1 ms x 64).
        tp: TopicPartition | None = None
        run: list[Record] = []
        parking = False
        resumed = self._resumed
        for message in messages:
            error = message.error()
            if error is not None:
                self._error_event(message, error)
                continue
            record = Record(message)
            if tp is None or record.partition != tp.partition or record.topic != tp.topic:
                tp = TopicPartition(record.topic, record.partition)
                if resumed:
                    resumed.pop(tp, None)  # librdkafka fetches it again
                parking = tp in self._paused or (bool(parked) and tp in parked)
                run = (parked if parking else batch).setdefault(tp, [])
            run.append(record)
            if parking:
                parked_bytes[tp] = parked_bytes.get(tp, 0) + _size(record)
        if parked:
            self._hold_full()
        if resumed:
            self._refetch()
        return batch

    def _check_usable(self) -> None:
        """Raise instead of calling a consumer that a commit past ``commit_timeout_ms`` still
        blocks: confluent-kafka runs one call at a time on a consumer, so every call (a poll
        of 0 s, ``assignment()``) would wait behind it, the executor's stop included."""
        blocked = max((s for c in self._commit_calls.values() if (s := c.blocked_s()) is not None),
                      default=None)
        if blocked is not None:
            raise KafkaException(KafkaError(
                KafkaError._TIMED_OUT,
                f"the consumer is blocked: a synchronous commit has not returned for "
                f"{blocked:.0f} s (a broker that does not answer, or librdkafka issue #5301) "
                f"and every call on the consumer waits behind it; the executor stops (a new "
                f"consumer recovers)",
            ))

    def _error_event(self, message: Any, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            return
        stop = (KafkaException(error) if error.fatal() or error.code() in _STOPPING_ERRORS
                else unretried_commit_read(self._consumer, error))
        if stop is not None:
            # Raised by the next poll: the records around it are not skipped.
            self._pending = self._pending or stop
            return
        log.warning("%s: %s", message.topic() or "consumer", error.str())

    def _consume(self, wanted: int, timeout: float) -> list[Any]:
        """Up to ``wanted`` messages, waiting up to ``timeout`` for the first one only."""
        consume = self._consumer.consume
        messages = self._current(consume(wanted, 0), [])
        if messages or timeout <= 0:
            return messages
        messages = self._current(consume(1, timeout), [])
        if messages and wanted > 1:
            messages = self._current(consume(wanted - 1, 0), messages)
        return messages

    def _current(self, new: list[Any], taken: list[Any]) -> list[Any]:
        """``taken + new`` without the messages of partitions revoked or lost while ``new`` was
        consumed. librdkafka hands out what it collected before serving a rebalance callback
        until its fetch barrier arrives (and ``taken`` was collected before it), while the
        executor's revoke hook has forgotten those partitions and rewound the ones it keeps:
        handled, they ran after their new owner began on earlier records (the soak saw keys
        handled out of order). A partition assigned again later in the same call was
        fetched anew after the barrier had purged that call's old messages: its messages in
        ``new`` are kept (dropped, they would be skipped: librdkafka's position is past them)."""
        if not self._rebalanced:
            return taken + new if taken else new
        gone, self._rebalanced = self._rebalanced, {}
        self._gone.update(gone)
        stale_now = {tp for tp, again in gone.items() if not again}
        kept = [m for m in taken if m.error() is not None or (m.topic(), m.partition()) not in gone]
        kept += [m for m in new
                 if m.error() is not None or (m.topic(), m.partition()) not in stale_now]
        dropped = len(taken) + len(new) - len(kept)
        if dropped:
            log.info("dropped %d message(s) consumed before a rebalance of %s", dropped,
                     sorted(gone))
        return kept

    def _unpark(self, budget: int) -> dict[TopicPartition, list[Record]]:
        """Up to ``budget`` parked records of partitions no longer paused, oldest first."""
        batch: dict[TopicPartition, list[Record]] = {}
        for tp in [tp for tp in self._parked if tp not in self._paused]:
            records = self._parked[tp]
            if len(records) > budget:  # the rest stays parked, its byte count kept up to date
                batch[tp], self._parked[tp] = records[:budget], records[budget:]
                self._parked_bytes[tp] -= sum(map(_size, batch[tp]))
                break
            batch[tp] = records
            budget -= len(records)
            del self._parked[tp]
            del self._parked_bytes[tp]
            if not budget:
                break
        return batch

    def _hold_full(self) -> None:
        """Pause in librdkafka the paused partitions that have their share of ``park_bytes``
        parked."""
        if not self._paused:
            return
        share = self._park_bytes // len(self._paused)
        full = [
            tp for tp in self._paused - self._held
            if self._parked_bytes.get(tp, 0) >= share
        ]
        if full:
            self._consumer.pause(_to_confluent(full))
            self._held.update(full)
            for tp in full:
                self._resumed.pop(tp, None)

    def _forget(self, partitions: set[TopicPartition]) -> None:
        """Drop the pause state and parked records of partitions no longer ours, and the
        messages of theirs that the consume() under way collected (see :meth:`_current`)."""
        self._rebalanced.update(dict.fromkeys(partitions, False))
        self._paused -= partitions
        self._held -= partitions
        for tp in partitions:
            self._resumed.pop(tp, None)
        for tp in partitions:
            self._parked.pop(tp, None)
            self._parked_bytes.pop(tp, None)

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        """Subscribe to topics (or a regex); ``listener`` has kafka-python's
        ``AsyncConsumerRebalanceListener`` methods, run here on the polling thread."""
        names = [f"^{pattern}"] if pattern is not None else list(topics)
        if not names:
            raise ConfigError("subscribe() needs topics or a pattern.")
        hooks: dict[str, Callable[[Any, list[ConfluentPartition]], None]] = {}
        if listener is not None:
            hooks = {
                "on_assign": self._hook(listener.on_partitions_assigned, forget=False),
                "on_revoke": self._hook(listener.on_partitions_revoked, forget=True),
                "on_lost": self._hook(listener.on_partitions_lost, forget=True),
            }
        self._consumer.subscribe(names, **hooks)
        self._topics = list(names)

    def _hook(
        self, method: Callable[[set[TopicPartition]], Any], forget: bool
    ) -> Callable[[Any, list[ConfluentPartition]], None]:
        def called(consumer: Any, partitions: list[ConfluentPartition]) -> None:
            converted = _to_kafka(partitions)
            if forget:
                self._forget(converted)
                self._revoking = frozenset(converted)
            elif self._rebalanced:
                self._rebalanced.update((tp, True) for tp in converted if tp in self._rebalanced)
            try:
                result = method(converted)
                if isinstance(result, Coroutine):
                    self._run(result)
            finally:
                self._revoking = frozenset()

        return called

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Drive a listener coroutine to completion on this adapter's private event loop."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(coroutine)

    def subscription(self) -> set[str] | None:
        """The topics subscribed to through this adapter."""
        return set(self._topics) or None

    def assignment(self) -> set[TopicPartition]:
        self._check_usable()
        return _to_kafka(self._consumer.assignment())

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning these partitions' records; what the consumer still returns of them is
        parked, and a partition is paused in librdkafka once ``park_bytes`` are."""
        self._check_usable()
        self._paused.update(partitions)
        self._hold_full()

    def resume(self, *partitions: TopicPartition) -> None:
        """Return these partitions' records again, the parked ones first."""
        self._check_usable()
        self._paused.difference_update(partitions)
        held = self._held.intersection(partitions)
        if held:
            self._consumer.resume(_to_confluent(held))
            self._held -= held
            now = time.monotonic()
            self._resumed.update(dict.fromkeys(held, now))

    def _refetch(self) -> None:
        """Seek the partitions resumed in librdkafka that have returned nothing for
        REFETCH_AFTER_S to where they stand, so librdkafka fetches them now. Once a partition's
        prefetch passed ``queued.min.messages``, librdkafka postpones its next fetch by
        ``fetch.queue.backoff.ms`` (1 s by default); ``pause()`` empties that prefetch but keeps
        the postponement, so a plain Consumer's partition paused for 50 ms came back 0.94 s
        after ``resume()`` (2 ms with a seek, librdkafka 2.16), while the executor's workers sat
        idle. Only late ones: a seek also restarts a fetch that was coming, and seeking on every
        resume cost 1 ms x 64 on 4 partitions 20-40 % of its steady state against no seek in
        interleaved runs. A partition that has not returned a message yet, or is being revoked,
        has nothing to restart.
        """
        now = time.monotonic()
        late = [tp for tp, at in self._resumed.items() if now - at >= REFETCH_AFTER_S]
        if not late:
            return
        for tp in late:
            del self._resumed[tp]
        for position in self._consumer.position(_to_confluent(late)):
            tp = TopicPartition(position.topic, position.partition)
            if position.offset < 0 or tp in self._revoking:
                continue
            try:
                self._consumer.seek(position)
            except KafkaException as exc:  # revoked meanwhile: its next owner fetches it
                log.debug("resumed %s[%s]: seek to %s refused (%s)", tp.topic, tp.partition,
                          position.offset, exc)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def parked(self) -> int:
        """How many records are parked (paused partitions' records not returned yet)."""
        return sum(map(len, self._parked.values()))

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Consume ``partition`` from ``offset`` next (its parked records are dropped).

        A partition being revoked is left alone: librdkafka forgets its position as the
        callback returns (whoever is given it next starts from its committed offset), and has
        stopped its fetcher already, so a seek raised ``_STATE`` out of the callback."""
        self._check_usable()
        if partition in self._revoking:
            return
        self._parked.pop(partition, None)
        self._parked_bytes.pop(partition, None)
        self._consumer.seek(ConfluentPartition(partition.topic, partition.partition, offset))

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit the given offsets (and their metadata) synchronously, waiting at most
        ``commit_timeout_ms`` (TimeoutError); a partition the broker refused raises its error
        (MetadataTooLarge for metadata over its limit)."""
        self._commit(offsets, bounded=True)

    def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], bounded: bool) -> None:
        """``commit()``, on a helper thread (``bounded``) or on this one."""
        if not offsets:
            return
        consumer = self._consumer
        for level, group in self._by_level(offsets).items():
            committed = confluent_offsets(group)

            def call(committed: list[ConfluentPartition] = committed) -> Any:
                return consumer.commit(offsets=committed, asynchronous=False)

            try:
                results = (self._bounded_commit(level, call) if bounded else call()) or []
            except KafkaException as exc:
                _raise_too_large(exc.args[0], exc)
                raise
            for result in results:
                if result.error is not None:
                    error = KafkaException(result.error)
                    _raise_too_large(result.error, error)
                    raise error

    def _bounded_commit(self, level: int, call: Callable[[], Any]) -> Any:
        """``call()`` on level ``level``'s helper thread, waited for ``commit_timeout_ms``. A
        PriorityConsumer's level whose commit has not returned by then is renewed (a handle
        that lost every broker never returns, librdkafka issue #5301): the executor goes on
        with its other levels, and with this one once the group gives its partitions to the new
        consumer. A plain ``Consumer`` stays blocked (see ``_check_usable``)."""
        calls = self._commit_calls
        if level not in calls:
            calls[level] = BlockingCall("the executor's offset commit")
        try:
            return calls[level](call, self._commit_timeout_s)
        except TimeoutError:
            consumer = self._consumer
            if isinstance(consumer, PriorityConsumer):
                consumer.renew_level(level, f"did not return from a commit within "
                                            f"{self._commit_timeout_s:g} s")
                del calls[level]  # the call left blocked holds the replaced consumer
            raise

    def fetch_committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The commits of ``partitions``, within COMMITTED_TIMEOUT_MS (committed_offsets)."""
        self._check_usable()
        asked = _to_confluent(partitions)
        if not asked:
            return {}
        return committed_offsets(
            self._consumer.committed(asked, timeout=COMMITTED_TIMEOUT_MS / 1000))

    def commit_in_background(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> PendingCommit:
        """The bounded synchronous :meth:`commit`, answered at once: confluent-kafka runs one
        call at a time on a consumer, so a commit left running on a helper thread would hold
        the next poll anyway (librdkafka's threads go on fetching meanwhile; what they fetch
        is handed out once the commit returned)."""
        try:
            self.commit(offsets)
        except Exception as exc:
            return Answered(exc)
        return Answered()

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Awaitable[Any]:
        """Commit synchronously, on this thread (librdkafka allows it inside a rebalance
        callback; the revoke hook runs there, inside a poll or a close, and confluent-kafka
        runs one call at a time on a consumer, so a commit on a helper thread would wait for
        that call, which waits for it); return an awaitable already done, raising the
        commit's error if it failed."""
        try:
            self._commit(offsets, bounded=False)
        except Exception as exc:
            return _Completed(error=exc)
        return _Completed(dict(offsets))

    def transactions(self, producer: Any, owned: bool = False) -> ConfluentTransactions:
        """See ``ClientConsumer.transactions``: a ``confluent_kafka.Producer`` with a
        ``transactional.id``."""
        return ConfluentTransactions(producer, owned, self._commit_timeout_s)

    def transaction_groups(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> list[tuple[Any, dict[TopicPartition, OffsetAndMetadata]]]:
        consumer = self._consumer
        if not isinstance(consumer, PriorityConsumer):
            return [(consumer.consumer_group_metadata(), dict(offsets))]
        # Each level's own group, with that level's membership.
        return [
            (consumer.consumer_group_metadata(ConfluentPartition(*next(iter(group)))), group)
            for group in self._by_level(offsets).values()
        ]

    def rejoin_refused(self, error: BaseException, offsets: Mapping[TopicPartition, Any]) -> bool:
        """librdkafka rejoins by itself once its heartbeat is refused (no call to hurry it)."""
        return False

    def _by_level(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> dict[int, dict[TopicPartition, OffsetAndMetadata]]:
        """``offsets`` by the consumer's level (a plain ``Consumer``'s all at level 0)."""
        consumer = self._consumer
        if not isinstance(consumer, PriorityConsumer):
            return {0: dict(offsets)}
        by_level: dict[int, dict[TopicPartition, OffsetAndMetadata]] = {}
        for tp, meta in offsets.items():
            by_level.setdefault(consumer.priority_of(tp.topic), {})[tp] = meta
        return by_level

    def close(self) -> None:
        """Close the consumer, waiting at most ``commit_timeout_ms`` (a close commits and
        leaves the group; one still blocked then is named in a warning and left)."""
        self._parked.clear()
        self._parked_bytes.clear()
        try:
            errors = close_within([("the executor's consumer", self._consumer.close)],
                                  self._commit_timeout_s)
            if errors:
                raise errors[0]
        finally:
            if self._loop is not None:
                self._loop.close()
                self._loop = None

    @property
    def levels(self) -> Levels:
        """A PriorityConsumer's levels (reserved shares, highest first, and the level of a
        priority topic); one level for a plain ``Consumer``."""
        consumer = self._consumer
        return consumer.levels if isinstance(consumer, PriorityConsumer) else ONE_LEVEL

    def dead_letter_producer(self, given: Any) -> Callable[[], DeadLetterSender]:
        """See ``ClientConsumer.dead_letter_producer``. A ``confluent_kafka.Producer`` sends the
        stored bytes as they are (a ``SerializingProducer``'s serializers are bypassed: the
        bytes were serialized once already); None: a producer of our own that connects as a
        PriorityConsumer does (a plain ``Consumer`` does not tell, so pass one)."""
        consumer = self._consumer
        connection = consumer.connection_config if isinstance(consumer, PriorityConsumer) else None
        return confluent_dead_letters(given, connection, consumer)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._consumer!r})"
