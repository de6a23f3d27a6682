"""ShardedExecutor: one partition processed N-way in parallel, per-key order kept, nothing lost.

Architecture (see docs/executor.md): the thread that calls :meth:`ShardedExecutor.run` is the
only one that calls the consumer (kafka-python is not thread safe), apart from the rebalance
listener, which kafka-python runs on its IO thread while that thread waits in ``poll()``. It
polls, records every record in an :class:`~priority_kafka.offsets.OffsetTracker`, and queues it
in a :class:`~priority_kafka.scheduling.LaneQueue` under its ordering lane. A shared pool of worker
threads takes records from that queue (one at a time per lane, levels by their reserved share),
runs the handler with retries, and reports each outcome through a thread-safe queue that the
polling thread drains. The polling thread then moves the commit watermark, pauses partitions
with too much in flight and resumes them once drained (still calling ``poll()`` meanwhile), and
commits periodically, on revoke and on stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
import queue
import signal
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from types import FrameType
from typing import Any, Literal, NamedTuple, TypeAlias

import attrs
from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
from kafka.structs import OffsetAndMetadata, TopicPartition

from priority_kafka._checks import int_at_least
from priority_kafka._kafka_compat import release_parked_records
from priority_kafka.errors import ConfigError, HandlerError, IllegalStateError
from priority_kafka.offsets import OffsetTracker
from priority_kafka.scheduling import LaneQueue
from priority_kafka.sharding import Ordering, check_ordering, lane_of

__all__ = ["DEAD_LETTER_HEADERS", "ExecutorConfig", "FailurePolicy", "ShardedExecutor"]

log = logging.getLogger(__name__)

FailurePolicy: TypeAlias = Literal["dead_letter", "callback", "stop"]
FAILURE_POLICIES: tuple[FailurePolicy, ...] = ("dead_letter", "callback", "stop")

#: Headers added to a dead-lettered record (after the record's own headers), in this order.
DEAD_LETTER_HEADERS = (
    "dead_letter.error",
    "dead_letter.topic",
    "dead_letter.partition",
    "dead_letter.offset",
    "dead_letter.attempts",
)

# How long the polling thread waits in poll() while a partition is paused: short, so a drained
# partition resumes quickly, yet not a spin.
_PAUSED_POLL_MS = 10
# kafka-python 3.0.12 completes a group (re)join only inside a poll() that blocks long enough
# for the whole JoinGroup/SyncGroup exchange; a shorter one can leave the member stuck
# "rebalancing" with no assignment. While joining, each poll() waits at least this long.
_JOIN_POLL_MS = 500
# Longest single wait for a completion while draining, so stop requests are noticed.
_DRAIN_STEP_S = 0.1


def _one_of(choices: tuple[str, ...]) -> Callable[[object, attrs.Attribute[Any], object], None]:
    def validate(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value not in choices:
            raise ConfigError(
                f"{attribute.name!r} must be one of {', '.join(choices)} (got {value!r})."
            )

    return validate


@attrs.frozen(kw_only=True)
class ExecutorConfig:
    """Settings of a :class:`ShardedExecutor` (every one validated; times in milliseconds).

    Attributes:
        shards: worker threads in the shared pool (records of different lanes run in parallel
            on up to this many threads).
        ordering: ``"key"``, ``"partition"`` or ``"unordered"``; see :mod:`priority_kafka.sharding`.
        commit_interval_ms: commit the watermark at most this often (0: after every poll).
        max_in_flight_per_partition: pause a partition once this many of its records are
            received and not done (queued or running).
        resume_in_flight_per_partition: resume it once at most this many are left
            (default: half of the maximum).
        max_attempts: handler calls per record before the failure policy applies (1 = no retry).
        retry_backoff_ms / retry_backoff_max_ms: delay before the first retry, doubling per
            retry up to the maximum.
        failure_policy: ``"stop"`` (default; the executor stops and :meth:`ShardedExecutor.run`
            raises HandlerError), ``"dead_letter"`` (send to ``dead_letter_topic``) or
            ``"callback"`` (call ``on_failure``).
        dead_letter_topic: where ``"dead_letter"`` sends records.
        drain_timeout_ms: on stop, how long running handlers may take to finish.
        revoke_timeout_ms: on revoke, how long running handlers of the revoked partitions may
            take; keep it well below ``session_timeout_ms`` (heartbeats wait meanwhile).
        poll_timeout_ms: longest wait in one ``poll()`` when nothing is paused (10 ms while a
            partition is paused; at least 500 ms while the group joins).
        async_concurrency: for ``async def`` handlers, most coroutines running at once
            (default: ``shards``).
    """

    shards: int = attrs.field(default=16, validator=int_at_least(1))
    ordering: Ordering = attrs.field(default="key", converter=check_ordering)
    commit_interval_ms: int = attrs.field(default=1000, validator=int_at_least(0))
    max_in_flight_per_partition: int = attrs.field(default=1000, validator=int_at_least(1))
    resume_in_flight_per_partition: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(int_at_least(0))
    )
    max_attempts: int = attrs.field(default=3, validator=int_at_least(1))
    retry_backoff_ms: int = attrs.field(default=100, validator=int_at_least(0))
    retry_backoff_max_ms: int = attrs.field(default=5000, validator=int_at_least(0))
    failure_policy: FailurePolicy = attrs.field(
        default="stop", validator=_one_of(FAILURE_POLICIES)
    )
    dead_letter_topic: str | None = attrs.field(default=None)
    drain_timeout_ms: int = attrs.field(default=30000, validator=int_at_least(0))
    revoke_timeout_ms: int = attrs.field(default=3000, validator=int_at_least(0))
    poll_timeout_ms: int = attrs.field(default=100, validator=int_at_least(0))
    async_concurrency: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(int_at_least(1))
    )

    def __attrs_post_init__(self) -> None:
        resume = self.resume_in_flight_per_partition
        if resume is not None and resume >= self.max_in_flight_per_partition:
            raise ConfigError(
                "'resume_in_flight_per_partition' must be below 'max_in_flight_per_partition' "
                f"({self.max_in_flight_per_partition}) (got {resume})."
            )
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ConfigError(
                f"'retry_backoff_max_ms' must be at least 'retry_backoff_ms' "
                f"({self.retry_backoff_ms}) (got {self.retry_backoff_max_ms})."
            )
        if self.failure_policy == "dead_letter" and not self.dead_letter_topic:
            raise ConfigError(
                "'dead_letter_topic' must be a topic name when failure_policy is 'dead_letter' "
                f"(got {self.dead_letter_topic!r})."
            )

    @property
    def resume_threshold(self) -> int:
        """In-flight count at or below which a paused partition resumes."""
        if self.resume_in_flight_per_partition is not None:
            return self.resume_in_flight_per_partition
        return self.max_in_flight_per_partition // 2


class _Work(NamedTuple):
    """A record handed to the workers, with what its completion must be matched against."""

    tp: TopicPartition
    offset: int
    epoch: int
    record: Any


class _Revoked(NamedTuple):
    """What revoking partitions asks of the consumer."""

    commit: dict[TopicPartition, Any]
    rewind: dict[TopicPartition, int]  # where each must resume: dropped records come again
    paused: set[TopicPartition]


class _Outcome(enum.Enum):
    HANDLED = "handled"
    DEAD_LETTERED = "dead_lettered"
    CALLED_BACK = "called_back"
    # Retries were cut short by stop(): the record is not done and will be consumed again.
    ABANDONED = "abandoned"
    FAILED = "failed"


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


class ShardedExecutor:
    """Runs ``handler(record)`` for every record of ``consumer`` on a shared pool of workers.

    ``consumer`` is a :class:`~priority_kafka.PriorityConsumer` or a plain kafka-python
    ``KafkaConsumer`` (one level), created with ``enable_auto_commit=False``: the executor
    commits. ``handler`` is a function, run on a worker thread, or an ``async def`` function,
    run on an event-loop thread (at most ``async_concurrency`` at once); its return value is
    ignored and an exception counts as a failure.

    Guarantees:

    - **Order**: records of one lane (same key of the same partition in ``"key"`` mode; same
      partition in ``"partition"`` mode) are handled one at a time, in offset order, also
      across retries.
    - **At least once**: a committed offset never passes a record that was not handled,
      dead-lettered or accepted by ``on_failure``; after a crash, records are handled again from
      the last commit (duplicates are bounded by what was received since then: at most
      ``max_in_flight_per_partition`` plus one poll in flight, plus what completed within one
      ``commit_interval_ms``).
    - **Commits** happen every ``commit_interval_ms`` and on stop (from the polling thread), and
      on revoke (from the rebalance listener, for the revoked partitions, after their running
      records finish within ``revoke_timeout_ms``; skipped for a PriorityConsumer, see
      docs/executor.md); never for a partition no longer assigned. Completions from an earlier
      assignment of a partition are ignored; a revoked partition that is assigned again resumes
      from its watermark.
    - **Bounded memory**: a partition with ``max_in_flight_per_partition`` records received and
      not done is paused until at most ``resume_in_flight_per_partition`` are left, while
      ``poll()`` keeps being called, so a slow handler never gets the consumer evicted.
    - **Priority**: workers pick the next record by level (weighted by the consumer's
      ``reserved_quotas``): a higher-priority record runs at the next free worker instead of
      waiting behind lower-priority work, and every backlogged level gets at least its reserved
      share of handler time.

    Lifecycle: :meth:`run` once (it blocks); :meth:`stop` from any thread or a signal handler.
    """

    def __init__(
        self,
        consumer: Any,
        handler: Callable[[Any], Any],
        shards: int = 16,
        ordering: Ordering = "key",
        *,
        on_failure: Callable[[Any, BaseException, int], Any] | None = None,
        dead_letter_producer: Any = None,
        close_consumer: bool = True,
        **options: Any,
    ) -> None:
        if not callable(handler):
            raise ConfigError(f"'handler' must be callable (got {handler!r}).")
        try:
            self.config = ExecutorConfig(shards=shards, ordering=ordering, **options)
        except TypeError as exc:
            known = ", ".join(field.name for field in attrs.fields(ExecutorConfig))
            raise ConfigError(f"unknown executor option in {sorted(options)} ({known}).") from exc
        if self.config.failure_policy == "callback" and not callable(on_failure):
            raise ConfigError(
                f"'on_failure' must be callable when failure_policy is 'callback' "
                f"(got {on_failure!r})."
            )
        self._consumer = consumer
        self._handler = handler
        self._on_failure = on_failure
        self._close_consumer = close_consumer
        self._is_async = inspect.iscoroutinefunction(handler)
        self._dead_letter_producer = dead_letter_producer
        self._owns_producer = False
        quotas: Mapping[int, int] = getattr(consumer, "reserved_quotas", None) or {0: 1}
        self._priority_of: Callable[[str], int] | None = getattr(consumer, "priority_of", None)
        self._levels: dict[str, int] = {}
        self._work: LaneQueue[_Work] = LaneQueue(quotas)
        self._work_ready = threading.Condition()
        self._completions: queue.SimpleQueue[tuple[_Work, _Outcome, BaseException | None]] = (
            queue.SimpleQueue()
        )
        # Poll-thread state, also touched by rebalance callbacks (kafka-python runs them on its
        # IO thread while poll() blocks); never held across a consumer call.
        self._lock = threading.RLock()
        self._tracker: OffsetTracker[TopicPartition] = OffsetTracker()
        self._paused: set[TopicPartition] = set()
        # True from subscribing (and from each revoke) until some partitions are assigned.
        self._joining = False
        self._counts: Counter[str] = Counter()
        self._subscribed = False
        self._state = _State.NEW
        self._stop_requested = False
        self._stopping = threading.Event()  # set once the poll loop begins to shut down
        self._failure: tuple[_Work, BaseException] | None = None
        self._threads: list[threading.Thread] = []
        # Worker thread id -> partition of the record it runs (guarded by _work_ready).
        self._running: dict[int, TopicPartition] = {}
        self._next_commit = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None

    def __repr__(self) -> str:
        c = self.config
        return (
            f"ShardedExecutor(shards={c.shards}, ordering={c.ordering!r}, "
            f"failure_policy={c.failure_policy!r}, state={self._state.value!r})"
        )

    # -- public API ---------------------------------------------------------------------------

    def subscribe(
        self, topics: Collection[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        """Subscribe the consumer, with ``listener`` (if any) called after the executor's own.

        Mirrors ``KafkaConsumer.subscribe``. Use this rather than subscribing the consumer
        directly with a listener, so the executor can finish and commit revoked partitions.
        """
        self._consumer.subscribe(
            topics=list(topics), pattern=pattern, listener=_RebalanceListener(self, listener)
        )
        self._subscribed = True
        self._joining = True

    def stop(self) -> None:
        """Ask :meth:`run` to stop gracefully; returns at once (safe from a signal handler).

        :meth:`run` then stops taking records, drops queued ones, lets running handlers
        finish within ``drain_timeout_ms``, commits the watermark and closes the consumer.
        """
        self._stop_requested = True

    def stats(self) -> dict[str, int]:
        """Counters so far (a key may be absent until its event first happens): handled,
        dead_lettered, called_back, failed, abandoned, retries, commits, commit_failures,
        stale_completions, skipped_redeliveries, pauses; and in_flight, queued, running now."""
        with self._lock:
            counts = dict(self._counts)
            counts["in_flight"] = self._tracker.in_flight()
        with self._work_ready:
            counts["queued"] = self._work.queued
            counts["running"] = self._work.running
        return counts

    def run(self, handle_signals: bool = False) -> None:
        """Poll and dispatch until :meth:`stop` (or a failure under the ``"stop"`` policy).

        Blocks the calling thread, which becomes the only thread that uses the consumer. With
        ``handle_signals`` (call from the main thread), SIGTERM and SIGINT call :meth:`stop`
        while it runs. Raises HandlerError if a record failed under the ``"stop"`` policy (or
        its dead letter or callback failed), after committing what was safely done.
        """
        if self._state is not _State.NEW:
            raise IllegalStateError(
                f"run() may be called once per executor (it is {self._state.value})."
            )
        self._state = _State.RUNNING
        with self._signals(handle_signals):
            try:
                self._start()
                while not self._stop_requested:
                    self._poll_once()
                self._shutdown()
            finally:
                self._release()
        if self._failure is not None:
            work, error = self._failure
            raise HandlerError(
                f"handler failed on {work.tp.topic}[{work.tp.partition}]@{work.offset} "
                f"({self.config.failure_policy!r} policy): {error!r}"
            ) from error

    # -- polling thread -----------------------------------------------------------------------

    def _start(self) -> None:
        consumer = self._consumer
        if not self._subscribed:
            topics = consumer.subscription()
            if topics:
                # Re-subscribe with our listener, so revoked partitions are drained and committed
                # (kafka-python logs "subscription unchanged" but installs the listener).
                self.subscribe(sorted(topics))
            elif not consumer.assignment():
                raise IllegalStateError(
                    "subscribe or assign the consumer (or call executor.subscribe()) before run()."
                )
        if self.config.failure_policy == "dead_letter" and self._dead_letter_producer is None:
            self._dead_letter_producer = self._new_producer()
            self._owns_producer = True
        if self._is_async:
            self._start_loop()
        for index in range(self.config.shards):
            thread = threading.Thread(
                target=self._worker, name=f"priority-kafka-worker-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _new_producer(self) -> Any:
        from kafka import KafkaProducer

        # KafkaConsumer.config is its settings dict; PriorityConsumer's is not.
        config = getattr(self._consumer, "config", None)
        servers = config.get("bootstrap_servers") if isinstance(config, Mapping) else None
        if not servers:
            raise ConfigError(
                "pass 'dead_letter_producer': the consumer does not expose bootstrap_servers."
            )
        return KafkaProducer(bootstrap_servers=servers, acks="all")

    def _poll_once(self) -> None:
        if self._joining:
            timeout = max(_JOIN_POLL_MS, self.config.poll_timeout_ms)
        elif self._paused:
            timeout = min(_PAUSED_POLL_MS, self.config.poll_timeout_ms)
        else:
            timeout = self.config.poll_timeout_ms
        release_parked_records(self._consumer)
        batch = self._consumer.poll(timeout_ms=timeout)
        if batch:
            self._dispatch(batch)
        self._drain_completions()
        self._flow_control()
        now = time.monotonic()
        if now >= self._next_commit:
            self._commit()
            self._next_commit = now + self.config.commit_interval_ms / 1000

    def _level_of(self, topic: str) -> int:
        level = self._levels.get(topic)
        if level is None:
            level = 0 if self._priority_of is None else self._priority_of(topic)
            self._levels[topic] = level
        return level

    def _dispatch(self, batch: Mapping[TopicPartition, list[Any]]) -> None:
        ordering = self.config.ordering
        queued: list[tuple[int, Any, _Work]] = []
        with self._lock:
            for tp, records in batch.items():
                level = self._level_of(tp.topic)
                for record in records:
                    try:
                        epoch = self._tracker.received(tp, record.offset)
                    except IllegalStateError:
                        # Already received in this assignment (the position moved back): it is
                        # tracked, so skipping it loses nothing.
                        self._counts["skipped_redeliveries"] += 1
                        continue
                    lane = lane_of(tp.topic, tp.partition, record.key, record.offset, ordering)
                    queued.append((level, lane, _Work(tp, record.offset, epoch, record)))
        with self._work_ready:
            for level, lane, work in queued:
                self._work.push(level, lane, work)
            self._work_ready.notify(len(queued))

    def _drain_completions(self, block_s: float = 0.0) -> None:
        """Apply every completion reported so far, waiting up to ``block_s`` for the first."""
        try:
            first = self._completions.get(timeout=block_s) if block_s > 0 else None
        except queue.Empty:
            return
        with self._lock:
            if first is not None:
                self._complete(*first)
            while True:
                try:
                    self._complete(*self._completions.get_nowait())
                except queue.Empty:
                    return

    def _complete(self, work: _Work, outcome: _Outcome, error: BaseException | None) -> None:
        self._counts[outcome.value] += 1
        if outcome is _Outcome.ABANDONED:
            return
        if outcome is _Outcome.FAILED:
            assert error is not None
            if self._failure is None:
                self._failure = (work, error)
                log.error("stopping: record %s[%s]@%s failed: %r",
                          work.tp.topic, work.tp.partition, work.offset, error)
            self._stop_requested = True
            return
        if not self._tracker.completed(work.tp, work.offset, work.epoch):
            self._counts["stale_completions"] += 1

    def _flow_control(self) -> None:
        limit, resume_at = self.config.max_in_flight_per_partition, self.config.resume_threshold
        with self._lock:
            to_pause, to_resume = [], []
            for tp in self._tracker.partitions():
                in_flight = self._tracker.in_flight(tp)
                if tp not in self._paused and in_flight >= limit:
                    to_pause.append(tp)
                elif tp in self._paused and in_flight <= resume_at:
                    to_resume.append(tp)
            self._paused.update(to_pause)
            self._paused.difference_update(to_resume)
            self._counts["pauses"] += len(to_pause)
        if to_pause:
            self._consumer.pause(*to_pause)
        if to_resume:
            self._consumer.resume(*to_resume)

    def _committable(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Any]:
        with self._lock:
            offsets = {}
            for tp in partitions:
                mark = self._tracker.committable(tp)
                if mark is not None:
                    offsets[tp] = OffsetAndMetadata(mark, "", -1)
            return offsets

    def _commit(self) -> None:
        assigned = set(self._consumer.assignment())
        with self._lock:
            owned = [tp for tp in self._tracker.partitions() if tp in assigned]
        offsets = self._committable(owned)
        if not offsets:
            return
        try:
            self._consumer.commit(offsets)
        except Exception as exc:  # a rebalance raced the commit; the next one catches up
            self._commit_failed(offsets, exc)
            return
        self._committed(offsets)

    def _committed(self, offsets: Mapping[TopicPartition, Any]) -> None:
        with self._lock:
            for tp, meta in offsets.items():
                self._tracker.mark_committed(tp, meta.offset)
            self._counts["commits"] += 1

    def _commit_failed(self, offsets: Mapping[TopicPartition, Any], exc: BaseException) -> None:
        with self._lock:
            self._counts["commit_failures"] += 1
        log.warning("commit of %s failed: %r", {tp: m.offset for tp, m in offsets.items()}, exc)

    def _await_running(
        self, partitions: Collection[TopicPartition] | None, budget_s: float
    ) -> bool:
        """Wait up to ``budget_s`` until no record of ``partitions`` (None: any) is running.

        Queued records must have been discarded first; returns whether everything finished.
        """
        deadline = time.monotonic() + budget_s
        while True:
            with self._work_ready:
                running = [
                    tp for tp in self._running.values() if partitions is None or tp in partitions
                ]
            if not running:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._drain_completions(block_s=min(remaining, _DRAIN_STEP_S))

    def _discard_queued(self, partitions: Collection[TopicPartition] | None) -> int:
        with self._work_ready:
            dropped = self._work.discard(lambda w: partitions is None or w.tp in partitions)
        return len(dropped)

    def _shutdown(self) -> None:
        self._stopping.set()
        self._discard_queued(None)
        if not self._await_running(None, self.config.drain_timeout_ms / 1000):
            log.warning(
                "stop: handlers still running after drain_timeout_ms=%s; their records are "
                "not committed and will be consumed again", self.config.drain_timeout_ms,
            )
        self._drain_completions()
        self._commit()

    def _release(self) -> None:
        self._stopping.set()
        self._state = _State.CLOSED
        with self._work_ready:
            self._work_ready.notify_all()
        if self._close_consumer:
            try:
                self._consumer.close()
            except Exception:  # closing must not hide the run's own outcome
                log.exception("closing the consumer failed")
        if self._owns_producer and self._dead_letter_producer is not None:
            self._dead_letter_producer.close()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        for thread in self._threads:
            thread.join(timeout=0.5)  # a handler stuck past the drain budget keeps its daemon

    # -- rebalance (kafka-python's IO thread, while poll() blocks) ----------------------------

    def _revoke(self, revoked: Collection[TopicPartition]) -> _Revoked:
        """Finish the revoked partitions and forget them; say what to commit, seek, resume."""
        with self._lock:
            mine = {tp for tp in revoked if tp in set(self._tracker.partitions())}
        if not mine:
            return _Revoked({}, {}, set())
        self._discard_queued(mine)
        if not self._await_running(mine, self.config.revoke_timeout_ms / 1000):
            log.warning("revoke: handlers of %s still running after revoke_timeout_ms=%s; "
                        "their records will be consumed again", sorted(mine),
                        self.config.revoke_timeout_ms)
        commit = self._committable(mine)
        with self._lock:
            rewind = {tp: self._tracker.watermark(tp) for tp in mine}
            paused = mine & self._paused
        self._forget(mine)
        return _Revoked(commit, {tp: o for tp, o in rewind.items() if o is not None}, paused)

    def _forget(self, partitions: Collection[TopicPartition]) -> None:
        self._discard_queued(partitions)
        with self._lock:
            for tp in partitions:
                self._tracker.forget(tp)
                self._paused.discard(tp)

    # -- worker threads -----------------------------------------------------------------------

    def _worker(self) -> None:
        ident = threading.get_ident()
        while True:
            with self._work_ready:
                while (task := self._work.next()) is None:
                    if self._state is _State.CLOSED:
                        return
                    self._work_ready.wait()
                self._running[ident] = task.item.tp
            started = time.monotonic()
            outcome, error = self._process(task.item)
            with self._work_ready:
                if outcome in (_Outcome.FAILED, _Outcome.ABANDONED):
                    # The record is not done: nothing queued may overtake it (the next record
                    # of its lane least of all). The executor stops; the rest comes again.
                    self._stop_requested = True
                    self._work.discard(lambda _: True)
                del self._running[ident]
                self._work.finish(task, time.monotonic() - started)
            self._completions.put((task.item, outcome, error))

    def _process(self, work: _Work) -> tuple[_Outcome, BaseException | None]:
        config = self.config
        delay = config.retry_backoff_ms / 1000
        attempts = 0
        while True:
            attempts += 1
            try:
                self._call(work.record)
                return _Outcome.HANDLED, None
            except Exception as exc:
                error: Exception = exc
            if attempts >= config.max_attempts:
                break
            with self._lock:
                self._counts["retries"] += 1
            log.info("retrying %s[%s]@%s in %.3fs after attempt %d: %r", work.tp.topic,
                     work.tp.partition, work.offset, delay, attempts, error)
            if self._stopping.wait(delay):
                return _Outcome.ABANDONED, error
            delay = min(delay * 2, config.retry_backoff_max_ms / 1000)
        return self._apply_policy(work, error, attempts)

    def _apply_policy(
        self, work: _Work, error: Exception, attempts: int
    ) -> tuple[_Outcome, BaseException | None]:
        policy = self.config.failure_policy
        try:
            if policy == "dead_letter":
                self._send_dead_letter(work, error, attempts)
                return _Outcome.DEAD_LETTERED, None
            if policy == "callback":
                assert self._on_failure is not None
                self._on_failure(work.record, error, attempts)
                return _Outcome.CALLED_BACK, None
        except Exception as policy_error:  # the record is not done: stop rather than skip it
            policy_error.__cause__ = error
            return _Outcome.FAILED, policy_error
        return _Outcome.FAILED, error

    def _send_dead_letter(self, work: _Work, error: Exception, attempts: int) -> None:
        record = work.record
        values = (
            f"{type(error).__name__}: {error}", work.tp.topic, work.tp.partition, work.offset,
            attempts,
        )
        headers = list(record.headers or ())
        headers += [
            (name, str(value).encode())
            for name, value in zip(DEAD_LETTER_HEADERS, values, strict=True)
        ]
        assert self._dead_letter_producer is not None and self.config.dead_letter_topic
        future = self._dead_letter_producer.send(
            self.config.dead_letter_topic, value=record.value, key=record.key, headers=headers
        )
        future.get(timeout=30)

    def _call(self, record: Any) -> None:
        if not self._is_async:
            self._handler(record)
            return
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._call_async(record), self._loop).result()

    # -- async handlers -----------------------------------------------------------------------

    def _start_loop(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        limit = self.config.async_concurrency or self.config.shards
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            self._semaphore = asyncio.Semaphore(limit)
            ready.set()
            loop.run_forever()
            loop.close()

        thread = threading.Thread(target=serve, name="priority-kafka-event-loop", daemon=True)
        thread.start()
        ready.wait()
        self._threads.append(thread)

    async def _call_async(self, record: Any) -> None:
        assert self._semaphore is not None
        async with self._semaphore:
            result = self._handler(record)
            assert isinstance(result, Awaitable)
            await result

    # -- signals ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _signals(self, enabled: bool) -> Iterator[None]:
        if not enabled:
            yield
            return
        if threading.current_thread() is not threading.main_thread():
            raise IllegalStateError("run(handle_signals=True) must be called on the main thread.")

        def request_stop(signum: int, frame: FrameType | None) -> None:
            log.info("signal %s: stopping gracefully", signal.Signals(signum).name)
            self.stop()

        signals = (signal.SIGTERM, signal.SIGINT)
        previous = {sig: signal.signal(sig, request_stop) for sig in signals}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class _RebalanceListener(AsyncConsumerRebalanceListener):
    """The executor's rebalance hooks, then the user's listener.

    kafka-python calls these on its IO thread while ``poll()`` blocks; they may not call a
    blocking consumer method there, so the revoke commit is ``commit_async`` awaited in place
    (it completes before the group rejoins, while the partitions are still owned).
    """

    def __init__(self, executor: ShardedExecutor, user: Any) -> None:
        self._executor = executor
        self._user = user

    async def on_partitions_revoked(self, revoked: Any) -> None:
        executor, consumer = self._executor, self._executor._consumer
        if executor._stopping.is_set():
            # The consumer is closing: run() already drained and committed.
            executor._forget(set(revoked))
            await self._call_user("on_partitions_revoked", revoked)
            return
        executor._joining = True
        done = executor._revoke(revoked)
        # kafka-python keeps the position and pause of a partition that is assigned again
        # (eager rebalance): rewind it to the watermark, so the records dropped from the queue
        # are fetched again, and resume it, as the executor forgot that it paused it.
        for tp, offset in done.rewind.items():
            consumer.seek(tp, offset)
        if done.paused:
            consumer.resume(*done.paused)
        if done.commit:
            try:
                await consumer.commit_async(done.commit)
            except Exception as exc:
                executor._commit_failed(done.commit, exc)
            else:
                executor._committed(done.commit)
        await self._call_user("on_partitions_revoked", revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        # An empty assignment (the group joined before the topic's metadata arrived) is
        # followed by another rejoin: keep waiting for it as for a join.
        self._executor._joining = not assigned
        await self._call_user("on_partitions_assigned", assigned)

    async def on_partitions_lost(self, lost: Any) -> None:
        # The group already gave these partitions away: drop their work, commit nothing.
        self._executor._forget(set(lost))
        await self._call_user("on_partitions_lost", lost)

    async def _call_user(self, method: str, partitions: Any) -> None:
        if self._user is None:
            return
        result = getattr(self._user, method)(partitions)
        if inspect.isawaitable(result):
            await result
