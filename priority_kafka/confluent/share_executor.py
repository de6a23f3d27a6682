"""ShareExecutor (experimental): a handler over the levels of a PriorityShareConsumer, on a pool.

``ShareExecutor(PriorityShareConsumer(...), handler)`` runs ``handler(record)`` for every record
the levels' share groups deliver, on the executor's worker pool
(:class:`priority_kafka._workers.WorkerPool`, with its level shares: a higher-priority
record runs at the next free worker), and acknowledges each record by its outcome: ACCEPT
once the handler succeeded (or its dead letter is sent), REJECT or RELEASE by the failure
policy, RELEASE for everything not finished when it stops.

Why not ShardedExecutor over an adapter: ShardedExecutor's ledger commits a watermark per
partition and skips a partition's offsets at or below the last one received as redeliveries;
a share group has no offsets to commit, delivers a partition's records to several members with
gaps, and redelivers released records with lower offsets, which that ledger would drop. What
is shared is the pool, the retries and failure handling (RecordHandler), the counters and the
lifecycle (``run()`` with signals, ``stop()``, drain and release:
:class:`~priority_kafka._workers.Lifecycle`); the loop, the acknowledgements and the
locks are this module's (:mod:`._acquisition`).

Acquisition is bounded three ways: a level polls again only once every record of its last poll
is acknowledged (explicit mode), each level's fetch asks for ``max.poll.records`` records
(rounded up by the broker to whole producer batches), and what no worker started within
``release_after_ms`` is RELEASEd at once for another member. A record whose handler runs past
the lock is RELEASEd when the lock ends (its outcome no longer counts). See
docs/share-groups.md.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from confluent_kafka import (
    AcknowledgeType,
    IllegalStateException,
    KafkaError,
    KafkaException,
    Message,
)
from confluent_kafka.admin import AdminClient

from priority_kafka._structs import TopicPartition
from priority_kafka._workers import Counters, Lifecycle, RecordHandler, WorkerPool, check_callables
from priority_kafka.confluent._acquisition import Acquisition
from priority_kafka.confluent._dead_letters import confluent_dead_letters
from priority_kafka.confluent._records import Record
from priority_kafka.confluent._share_config import (
    GroupSettings,
    ShareExecutorConfig,
    ShareExecutorStats,
    ShareLevelStats,
    read_group_settings,
)
from priority_kafka.confluent.share import PriorityShareConsumer, ShareLevel
from priority_kafka.errors import ConfigError, IllegalStateError

__all__ = ["ShareExecutor", "ShareRecord"]

log = logging.getLogger(__name__)

# While records run (or ran less than _ACTIVE_S ago), the polling thread polls every level that
# may without waiting, then waits at most _BUSY_WAIT_S for a worker to finish a record; once
# idle for longer, it waits at most _IDLE_WAIT_S in the highest level's poll (the lower levels
# are polled without waiting after it, so their first record after a lull waits up to that).
_BUSY_WAIT_S = 0.005
_IDLE_WAIT_S = 0.05
_ACTIVE_S = 1.0

_ACK_NAMES = {
    AcknowledgeType.ACCEPT: "accepted",
    AcknowledgeType.REJECT: "rejected",
    AcknowledgeType.RELEASE: "released",
}
_POLICY_ACK = {"reject": AcknowledgeType.REJECT, "release": AcknowledgeType.RELEASE}


class ShareRecord(Record):
    """A record handed to a ShareExecutor's handler: the fields of the confluent executor's
    :class:`~priority_kafka.confluent._records.Record` (``topic``, ``partition``, ``offset``,
    ``key``, ``value``, ``headers``, ``timestamp``) plus its priority ``level`` and
    ``delivery_count`` (1 the first time the share group delivers it)."""

    __slots__ = ("_ack", "_acquisition", "_started", "delivery_count", "level")

    def __init__(self, message: Message, level: int) -> None:
        super().__init__(message)
        self.level = level
        self.delivery_count: int = message.delivery_count() or 1
        self._ack: AcknowledgeType | None = None  # a failure policy's choice; None: ACCEPT
        self._acquisition: Acquisition[ShareRecord] | None = None
        self._started = False

    def _claim(self) -> bool:
        # On the worker, before each handler call: the first one starts the record unless it
        # was released meanwhile (retries find it started).
        if not self._started:
            assert self._acquisition is not None
            self._started = self._acquisition.claim(self)
        return self._started


class _Completions:
    """What the pool marks done for one partition of one acquisition (a
    :class:`~priority_kafka._workers.Completion`): ``complete(offsets)`` (on a worker)
    queues those records for acknowledgement and wakes the polling thread. One per
    acquisition, so a worker finishing a record of an earlier poll never marks a later delivery
    of the same offset; never forgotten (a record released meanwhile is dropped when settled)."""

    __slots__ = ("_finished", "_records", "_wake")

    epoch = 0
    forgotten = False

    def __init__(self, records: dict[int, ShareRecord], finished: deque[ShareRecord],
                 wake: threading.Event) -> None:
        self._records = records
        self._finished = finished
        self._wake = wake

    def complete(self, offsets: Iterable[int]) -> None:
        records = self._records
        self._finished.extend(records[offset] for offset in offsets)
        self._wake.set()


class _Level:
    """One level as the executor drives it: its share consumer, its current acquisition, when
    its pending acknowledgements are committed, and its figures."""

    __slots__ = ("acks_pending", "acquisition", "consumer", "counts", "delivery_counts",
                 "group_id", "level", "next_commit", "partitions", "settings")

    def __init__(self, share_level: ShareLevel) -> None:
        self.level = share_level.level
        self.consumer = share_level.consumer
        self.group_id = share_level.group_id
        self.acquisition: Acquisition[ShareRecord] | None = None
        self.partitions: list[TopicPartition] = []  # those of the acquisition
        self.acks_pending = False
        self.next_commit = 0.0
        self.settings = GroupSettings(30_000, 5)  # read when run() starts
        self.counts: Counter[str] = Counter()
        self.delivery_counts: Counter[int] = Counter()


class ShareExecutor:
    """Runs ``handler(record)`` for every record of ``consumer``'s share groups on a pool of
    workers, and acknowledges each (experimental, as the share consumer is).

    ``consumer`` is a :class:`~priority_kafka.confluent.PriorityShareConsumer` that has not
    polled; the executor polls and acknowledges through it from the thread in :meth:`run`.
    ``handler`` gets a :class:`ShareRecord`, on a worker thread (an ``async def`` handler on
    an event-loop thread, at most ``async_concurrency`` at once); an exception is a failure.
    Options: :class:`~priority_kafka.confluent.ShareExecutorConfig`.

    Guarantees:

    - **Acknowledgement by outcome**: ACCEPT only after the handler returned (or, under
      ``"dead_letter"``, after the dead letter is acknowledged by the broker); REJECT or
      RELEASE by the failure policy; on stop, RELEASE of every record acquired and not
      finished (queued, failed, or running past ``drain_timeout_ms``), so another member gets
      it at once. Acknowledgements are committed on the level's next poll, at least every
      ``commit_interval_ms`` while it cannot poll, and on stop.
    - **At least once**, no order: a record comes again (to any member) after a RELEASE, a
      lock that ran out, or a crash before its ACCEPT reached the broker.
    - **Within the lock**: a level acquires again only once its last poll is acknowledged;
      records that no worker started within ``release_after_ms`` of the poll are RELEASEd
      then; a record still running when its lock ends is RELEASEd and its outcome dropped
      (counted as ``lock_expired``), so the level goes on polling.
    - **Priority**: workers pick the next record by level (weighted by the consumer's reserved
      quotas), as ShardedExecutor's: a higher-priority record runs at the next free worker,
      and every backlogged level gets at least its reserved share of handler time.

    Lifecycle: :meth:`run` once (it blocks); :meth:`stop` from any thread or a signal handler.
    """

    def __init__(
        self,
        consumer: PriorityShareConsumer,
        handler: Callable[[ShareRecord], Any],
        shards: int = 16,
        ordering: str = "unordered",
        *,
        on_failure: Callable[[ShareRecord, BaseException, int], Any] | None = None,
        dead_letter_producer: Any = None,
        close_consumer: bool = True,
        **options: Any,
    ) -> None:
        if not isinstance(consumer, PriorityShareConsumer):
            raise ConfigError(f"'consumer' must be a PriorityShareConsumer (got {consumer!r}).")
        try:
            self.config = ShareExecutorConfig(shards=shards, ordering=ordering, **options)
        except TypeError as exc:
            raise ConfigError(f"unknown ShareExecutor option in {sorted(options)}: {exc}") from exc
        config = self.config
        check_callables(handler, on_failure, config.failure_policy)
        if any(lv.buffer or lv.outstanding for lv in consumer.share_levels):
            raise IllegalStateError("the PriorityShareConsumer holds messages of its own poll(): "
                                    "give the ShareExecutor a consumer that has not polled.")
        self._consumer = consumer
        self._close_consumer = close_consumer
        self._levels = [_Level(share_level) for share_level in consumer.share_levels]
        self._by_level = {lv.level: lv for lv in self._levels}
        self._on_failure = on_failure
        self._counters = Counters()
        self._stats_lock = threading.Lock()
        self._lifecycle = Lifecycle(log, config.drain_timeout_ms, "are RELEASEd")
        self._wake = threading.Event()  # a worker finished records
        self._finished: deque[ShareRecord] = deque()
        common = config.common()
        self._handler = RecordHandler(
            _claiming(handler), common,
            on_failure=None if config.failure_policy in ("stop", "dead_letter") else self._failed,
            stopping=self._lifecycle.stopping, count=self._counters.add,
        )
        self._dead_letters = (
            confluent_dead_letters(dead_letter_producer, consumer.connection_config, consumer)
            if config.failure_policy == "dead_letter" else None
        )
        self._pool = WorkerPool(consumer.reserved_quotas, config.shards, "unordered",
                                self._handler, self._counters)
        self._active_until = 0.0  # the loop polls without waiting until then

    def __repr__(self) -> str:
        return (f"ShareExecutor(shards={self.config.shards}, "
                f"failure_policy={self.config.failure_policy!r}, "
                f"state={self._lifecycle.state.value!r})")

    # -- public API ---------------------------------------------------------------------------

    def subscribe(self, topics: list[str]) -> None:
        """Subscribe the consumer's levels to their priority topics of ``topics``."""
        self._consumer.subscribe(topics)

    def stop(self) -> None:
        """Ask :meth:`run` to stop gracefully; returns at once (safe from a signal handler).

        :meth:`run` then stops taking records, drops queued ones, lets running handlers
        finish within ``drain_timeout_ms``, ACCEPTs what finished, RELEASEs the rest and
        closes the consumer."""
        self._lifecycle.stop()

    def stats(self) -> ShareExecutorStats:
        """Per level and overall figures so far (any thread)."""
        with self._stats_lock:
            levels = {
                lv.level: ShareLevelStats(
                    **lv.counts, delivery_counts=dict(sorted(lv.delivery_counts.items())),
                    outstanding=len(lv.acquisition) if lv.acquisition is not None else 0,
                )
                for lv in self._levels
            }
        totals = self._counters.snapshot()
        queued, running = self._pool.sizes()
        return ShareExecutorStats(
            levels, dead_lettered=totals.dead_lettered, failed=totals.failed,
            abandoned=totals.abandoned, retries=totals.retries, queued=queued, running=running,
        )

    def run(self, handle_signals: bool | None = None) -> None:
        """Poll, dispatch and acknowledge until :meth:`stop` (or a failure under ``"stop"``).

        Blocks the calling thread, the only one that uses the consumer. Called from the main
        thread, Ctrl-C (SIGINT) and SIGTERM call :meth:`stop` (a second Ctrl-C raises
        KeyboardInterrupt at once); ``handle_signals=False`` leaves them to the application,
        ``True`` insists (IllegalStateError off the main thread), as
        :meth:`ShardedExecutor.run <priority_kafka.ShardedExecutor.run>` does. Raises
        HandlerError if a record failed under ``"stop"`` (or its dead letter or callback
        failed), after RELEASing it and everything else not finished."""
        self._lifecycle.run(
            handle_signals, self._pool, self._handler,
            start=self._start, step=self._loop_once, drained=self._settle, close=self._close,
        )
        self._lifecycle.raise_failure(self._pool.failure, self.config.failure_policy)

    # -- the polling thread -------------------------------------------------------------------

    def _start(self) -> None:
        if not any(lv.consumer.subscription() for lv in self._levels):
            raise IllegalStateError("subscribe the PriorityShareConsumer (or call "
                                    "executor.subscribe()) before run().")
        config = self.config
        admin = (AdminClient(self._consumer.connection_config)
                 if config.lock_duration_ms is None or config.delivery_count_limit is None
                 else None)
        settings = read_group_settings(admin, [lv.group_id for lv in self._levels], config)
        for lv in self._levels:
            lv.settings = settings[lv.group_id]
            release = config.release_after_ms or lv.settings.lock_ms // 2
            if release >= lv.settings.lock_ms:
                raise ConfigError(f"'release_after_ms' must be below the lock of share group "
                                  f"{lv.group_id!r} ({lv.settings.lock_ms} ms) (got {release}).")
            lv.consumer.set_acknowledgement_commit_callback(self._committed_callback(lv))
        if self._dead_letters is not None:
            self._handler.dead_letter_producer = self._dead_letters()
        self._handler.start()
        self._pool.start()

    def _loop_once(self) -> None:
        self._pool.reclaim()  # a record running long must not hold back the rest of its batch
        self._settle()
        now = time.monotonic()
        for lv in self._levels:
            self._release_due(lv, now)
        self._commit_due(now)
        pollable = [lv for lv in self._levels if lv.acquisition is None]
        if len(pollable) == len(self._levels) and now >= self._active_until:
            # Idle for a while: wait in the highest level's poll, then look at the others
            # without waiting (their fetches go on meanwhile).
            wait = min(_IDLE_WAIT_S, self.config.poll_timeout_ms / 1000)
            for lv in pollable:
                if self._acquire(lv, wait):
                    self._active_until = time.monotonic() + _ACTIVE_S
                wait = 0.0
            return
        # Records are running, or were lately: a wait inside one level's poll would hold back
        # the others' fetches and acknowledgements, so poll every level that may without
        # waiting, and wait for a worker (or a fetch) a moment.
        acquired = False
        for lv in pollable:
            acquired |= self._acquire(lv, 0.0)
        if acquired:
            self._active_until = time.monotonic() + _ACTIVE_S
        else:
            self._wake.wait(min(_BUSY_WAIT_S, self.config.poll_timeout_ms / 1000))

    def _acquire(self, lv: _Level, wait: float) -> bool:
        """Poll ``lv`` once; queue what it acquired. Returns whether it acquired any."""
        polled_at = time.monotonic()
        messages = lv.consumer.poll(wait)
        lv.acks_pending = False  # the poll sent them
        records = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(ShareRecord(message, lv.level))
            else:
                self._error_event(lv, error)
        if not records:
            return False
        settings = lv.settings
        release_after = self.config.release_after_ms or settings.lock_ms // 2
        acquisition = Acquisition(lv.level, records, polled_at, release_after / 1000,
                                  settings.lock_ms / 1000)
        by_partition: dict[TopicPartition, dict[int, ShareRecord]] = {}
        for record in records:
            record._acquisition = acquisition
            by_partition.setdefault(
                TopicPartition(record.topic, record.partition), {})[record.offset] = record
        with self._stats_lock:
            lv.acquisition = acquisition
            lv.partitions = list(by_partition)
            lv.counts["acquired"] += len(records)
            for record in records:
                lv.delivery_counts[record.delivery_count] += 1
                if record.delivery_count > 1:
                    lv.counts["redelivered"] += 1
        self._pool.push(
            (lv.level, tp, _Completions(by_offset, self._finished, self._wake),
             list(by_offset.values()))
            for tp, by_offset in by_partition.items()
        )
        return True

    def _error_event(self, lv: _Level, error: KafkaError) -> None:
        if error.fatal() or error.code() == KafkaError._FATAL:
            raise KafkaException(error)
        log.warning("level %s (share group %r): %s", lv.level, lv.group_id, error.str())

    def _settle(self) -> None:
        """Acknowledge the records workers finished, by their outcome."""
        self._wake.clear()
        finished = self._finished
        while finished:
            record = finished.popleft()
            acquisition = record._acquisition
            assert acquisition is not None
            if acquisition.settle(record):
                lv = self._by_level[record.level]
                self._acknowledge(lv, [record], record._ack or AcknowledgeType.ACCEPT)
                self._end_if_done(lv)

    def _release_due(self, lv: _Level, now: float) -> None:
        """RELEASE what could not start within release_after_ms, and what ran past the lock."""
        acquisition = lv.acquisition
        if acquisition is None:
            return
        unstarted = acquisition.release_unstarted(now)
        if unstarted:
            self._pool.discard(lv.partitions)
            self._acknowledge(lv, unstarted, AcknowledgeType.RELEASE, also="released_unstarted")
        expired = acquisition.expire(now)
        if expired:
            self._pool.discard(lv.partitions)
            log.warning("level %s: %d record(s) still running when their lock ended (%d ms); "
                        "RELEASEd, their outcome will not count", lv.level, len(expired),
                        lv.settings.lock_ms)
            self._acknowledge(lv, expired, AcknowledgeType.RELEASE, also="lock_expired")
        self._end_if_done(lv)

    def _acknowledge(self, lv: _Level, records: list[ShareRecord], ack: AcknowledgeType,
                     also: str | None = None) -> None:
        acknowledge = lv.consumer.acknowledge_offset
        refused = 0
        for record in records:
            try:
                acknowledge(record.topic, record.partition, record.offset, ack)
            except (IllegalStateException, KafkaException) as exc:
                # No longer in flight for the client (its lock is gone): it holds back no poll.
                refused += 1
                log.warning("level %s: %s[%s]@%s could not be acknowledged: %s", lv.level,
                            record.topic, record.partition, record.offset, exc)
        limit = lv.settings.delivery_count_limit
        with self._stats_lock:
            lv.counts[_ACK_NAMES[ack]] += len(records) - refused
            lv.counts["ack_failures"] += refused
            if also is not None:
                lv.counts[also] += len(records)
            if ack == AcknowledgeType.RELEASE:
                lv.counts["archived"] += sum(r.delivery_count >= limit for r in records)
        if not lv.acks_pending:
            lv.acks_pending = True
            lv.next_commit = time.monotonic() + self.config.commit_interval_ms / 1000

    def _end_if_done(self, lv: _Level) -> None:
        if lv.acquisition is not None and lv.acquisition.done:
            with self._stats_lock:
                lv.acquisition = None
                lv.partitions = []

    def _commit_due(self, now: float) -> None:
        for lv in self._levels:
            if lv.acks_pending and now >= lv.next_commit:
                lv.acks_pending = False
                lv.consumer.commit_async()

    def _committed_callback(self, lv: _Level) -> Callable[[Any, Any], None]:
        def committed(offsets: Any, error: Any) -> None:
            # On this thread, from inside a consumer call.
            if error is not None:
                refused = sum(len(numbers) for numbers in offsets.values())
                log.warning("level %s: the broker refused %d acknowledgement(s): %s",
                            lv.level, refused, error)
                with self._stats_lock:
                    lv.counts["ack_failures"] += refused

        return committed

    def _failed(self, record: ShareRecord, error: BaseException, attempts: int) -> None:
        """The reject, release and callback policies (on the worker): choose the record's
        acknowledgement."""
        policy = self.config.failure_policy
        if policy != "callback":
            record._ack = _POLICY_ACK[policy]
            return
        assert self._on_failure is not None
        chosen = self._on_failure(record, error, attempts)
        if chosen is not None and chosen not in _ACK_NAMES:
            raise ConfigError(f"'on_failure' must return an AcknowledgeType (ACCEPT, RELEASE "
                              f"or REJECT) or None (got {chosen!r}).")
        record._ack = chosen

    def _close(self) -> None:
        """The end of a run (after the drain and the last acknowledgements, or a failure):
        RELEASE every record acquired and not acknowledged; close (or commit) the levels."""
        for lv in self._levels:
            if lv.acquisition is not None:
                try:
                    self._acknowledge(lv, lv.acquisition.release_all(), AcknowledgeType.RELEASE)
                except Exception:  # closing must not hide the run's own outcome
                    log.exception("level %s: releasing the unfinished records failed", lv.level)
                self._end_if_done(lv)
        try:
            if self._close_consumer:
                self._consumer.close()
            else:
                for lv in self._levels:
                    lv.consumer.commit_sync(self.config.drain_timeout_ms / 1000)
                    lv.consumer.set_acknowledgement_commit_callback(None)
        except Exception:
            log.exception("closing the share consumer failed")


def _claiming(handler: Callable[[ShareRecord], Any]) -> Callable[[ShareRecord], Any]:
    """``handler`` run only on records not released before a worker started them (a released
    record is skipped; the executor ignores its completion)."""
    if inspect.iscoroutinefunction(handler):
        async def claimed_async(record: ShareRecord) -> None:
            if record._claim():
                result = handler(record)
                assert isinstance(result, Awaitable)
                await result

        return claimed_async

    def claimed(record: ShareRecord) -> None:
        if record._claim():
            handler(record)

    return claimed
