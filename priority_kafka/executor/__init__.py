"""ShardedExecutor: one partition processed N-way in parallel, per-key order kept, nothing lost.

The executor is a loop over four parts, each in its own module:

=============  ===================================================  ===========================
part           what it holds                                        who may touch it
=============  ===================================================  ===========================
the loop       poll, dispatch, periodic and final commits           the thread in ``run()``
(this module)
``_life-``     states, ``run()`` with signals, ``stop()``, drain    the thread in ``run()``;
``cycle``      and release (ShareExecutor's too)                    ``stop()`` any thread
the consumer   the client (kafka-python is not thread safe)         the ``run()`` thread; the
                                                                    hooks while it polls
``_ledger``    offsets received and done per partition, pauses,     any thread (its own lock)
               commit planning, revoke
``_pool``      lanes of queued records, worker threads, halt        any thread (its Condition)
``_handling``  handler calls, retries, failure policies, dead       worker threads
               letters, async handlers
``_hooks``     revoke / lost / assigned: finish, commit, forget     the consumer's listener
                                                                    thread, inside ``poll()``
``_outputs``,  exactly-once: handlers' outputs kept until a commit  workers keep; the committer
``_transac-``  covers their record; each commit one transaction     (the ``run()`` thread, or
``tions``      (outputs and offsets), abort and rewind on failure   a hook) takes and commits
=============  ===================================================  ===========================

The :meth:`run` thread polls, records every record in the ledger and queues it in the pool
under its ordering lane. Workers run the handler and report outcomes, which the :meth:`run`
thread applies to the ledger; it then pauses partitions with too much in flight and resumes
them once drained (still calling ``poll()`` meanwhile), and commits periodically and on stop.
The rebalance hooks commit revoked partitions. See docs/executor.md.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import attrs

from priority_kafka._rebalance import ChainedListener, check_listener
from priority_kafka._structs import TopicPartition
from priority_kafka._types import MetadataTooLarge, PendingCommit
from priority_kafka._workers import (
    DEAD_LETTER_HEADERS,
    Counters,
    ExecutorStats,
    Lifecycle,
    Output,
    OutputBuffer,
    RecordHandler,
    Undeserializable,
    WorkerPool,
    check_callables,
    handle_stop_signals,
    outputs_of,
    run_signals,
)
from priority_kafka.budgets import Budgets
from priority_kafka.config import ExecutorConfig, FailurePolicy
from priority_kafka.errors import ConfigError, DeserializationError, IllegalStateError
from priority_kafka.executor._budgets import BudgetedPool, BudgetStats, gate_for, partition_counter
from priority_kafka.executor._clients import as_client
from priority_kafka.executor._hooks import ExecutorHooks
from priority_kafka.executor._ledger import PartitionLedger
from priority_kafka.executor._loop_pool import LoopPool
from priority_kafka.executor._take_on import fetch_committed, take_on
from priority_kafka.executor._tasks import TaskPool
from priority_kafka.executor._transactions import TransactionalCommits
from priority_kafka.executor._waits import PAUSED_WAIT_S
from priority_kafka.sharding import Ordering

__all__ = [
    "DEAD_LETTER_HEADERS",
    "ExecutorConfig",
    "ExecutorStats",
    "FailurePolicy",
    "Output",
    "ShardedExecutor",
    "handle_stop_signals",
    "run_signals",
]

log = logging.getLogger(__name__)

# How often the polling thread looks for handlers running past stuck_warning_ms.
_STUCK_CHECK_S = 1.0


class ShardedExecutor:
    """Runs ``handler(record)`` for every record of ``consumer`` on a shared pool of workers.

    ``consumer`` is a :class:`~priority_kafka.PriorityConsumer` or a plain kafka-python
    ``KafkaConsumer`` (one level), a confluent-kafka ``Consumer`` or
    ``priority_kafka.confluent.PriorityConsumer``, given as it is (each family's adapter is
    picked here; see ``priority_kafka._types.ClientConsumer``), created with auto-commit off:
    the executor commits. A ``dead_letter_producer`` passed is used whatever its serializers
    (a dead letter is the record's stored bytes; see docs/executor.md) and never closed.
    ``handler`` is a function, run on a worker thread, or an ``async def`` function, run as
    tasks of an event-loop thread of the executor's (at most ``async_concurrency`` at once; no
    worker thread, but with ``budgets``: see docs/executor.md); its return value is ignored
    and an exception counts as a failure.

    With ``transactional_producer`` (a kafka-python producer with a ``transactional_id``, or
    a ``confluent_kafka.Producer`` with a ``transactional.id``, of the consumer's family, or a
    function of no arguments that builds one; the
    consumer reading with ``isolation_level="read_committed"``), the
    executor runs **exactly-once to Kafka**: the handler *returns* what it produces (None, an
    :class:`Output` or a list of them) instead of sending it, and every commit is one Kafka
    transaction holding the outputs of the records it covers and the offsets that cover them
    (all levels' groups in it); a dead letter goes into it too. A failed transaction is
    aborted and its partitions rewound to their last commit. A producer that cannot go on
    (fenced: its transaction outlived ``transaction.timeout.ms``, say in a process frozen
    mid-commit, or a newer one took its transactional id) stops the executor with
    :class:`~priority_kafka.errors.TransactionError`; one built by a function is closed and
    replaced by a new one from it, and the executor goes on (it stops if the function fails,
    or if producers keep being fenced before one commits). See docs/executor.md.

    Guarantees:

    - **Order**: records of one lane (same key of the same partition in ``"key"`` mode; same
      partition in ``"partition"`` mode) are handled one at a time, in offset order, also
      across retries.
    - **At least once**: a committed offset never passes a record that was not handled,
      dead-lettered or accepted by ``on_failure``; after a crash, records are handled again from
      the last commit (duplicates are bounded by what was received since then: at most
      ``max_in_flight_per_partition`` plus one poll in flight, plus what completed within one
      ``commit_interval_ms``).
    - **No replay of finished records** (``offset_map``, on by default): each commit also
      carries the offsets finished above its watermark, and a partition taken on (restart,
      rebalance) skips them; after a crash only records that were not finished, or finished
      after the last commit, are handled again.
    - **Commits** happen every ``commit_interval_ms`` and on stop (from the polling thread), and
      on revoke (from the rebalance listener, for the revoked partitions, after their running
      records finish within ``revoke_timeout_ms``), for a PriorityConsumer as for a
      KafkaConsumer; never for a partition no longer assigned. Completions from an earlier
      assignment of a partition are ignored; a revoked partition that is assigned again resumes
      from its watermark.
    - **Bounded memory**: a partition with ``max_in_flight_per_partition`` records received and
      not done is paused until at most ``resume_in_flight_per_partition`` are left, while
      ``poll()`` keeps being called, so a slow handler never gets the consumer evicted; so is
      a partition whose records' keys and values pass its share of ``max_in_flight_bytes``.
    - **Priority**: workers pick the next record by level (weighted by the consumer's
      ``reserved_quotas``): a higher-priority record runs at the next free worker instead of
      waiting behind lower-priority work, and every backlogged level gets at least its reserved
      share of handler time.
    - **Budgets** (``budgets``): a record waits in its lane, holding no worker, for its
      resource's tokens, split by level like the poll quotas; see docs/budgets.md.

    Lifecycle: :meth:`run` once (it blocks), or :meth:`run_async` (``async with``) on the
    loop of an aio consumer; :meth:`stop` from any thread or a signal handler.
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
        transactional_producer: Any = None,
        budgets: Budgets | None = None,
        **options: Any,
    ) -> None:
        try:
            self.config = ExecutorConfig(shards=shards, ordering=ordering, **options)
        except TypeError as exc:
            known = ", ".join(field.name for field in attrs.fields(ExecutorConfig))
            raise ConfigError(f"unknown executor option in {sorted(options)} ({known}).") from exc
        config = self.config
        partitions_of = partition_counter(consumer)
        consumer = as_client(consumer, commit_timeout_ms=config.commit_timeout_ms)
        check_callables(handler, on_failure, config.failure_policy)
        self._consumer = consumer
        self._close_consumer = close_consumer
        self._levels = consumer.levels
        self._gate = gate_for(budgets, self._levels, config.ordering, partitions_of)
        self._level_cache: dict[str, int] = {}
        self._counters = Counters()
        self._lifecycle = Lifecycle(
            log, config.drain_timeout_ms, "are not committed and will be consumed again",
            also=", or run_async()",
        )
        exactly_once = transactional_producer is not None
        self._outputs = OutputBuffer() if exactly_once else None
        self._handler = RecordHandler(
            handler, config, on_failure=on_failure, stopping=self._lifecycle.stopping,
            count=self._counters.add, keep=self._keep if exactly_once else None,
            wrap=None if self._gate is None else self._gate.wrap,
        )
        self._dead_letters = (
            consumer.dead_letter_producer(dead_letter_producer)
            if config.failure_policy == "dead_letter" and not exactly_once else None
        )
        args = (self._levels.reserved, config.shards, config.ordering, self._handler,
                self._counters)
        self._pool: WorkerPool | LoopPool
        if self._gate is not None:
            self._pool = BudgetedPool(*args, self._gate)
        elif self._handler.is_async:
            self._pool = LoopPool(functools.partial(
                TaskPool, self._levels.reserved, config.ordering, self._handler, self._counters,
                config.async_concurrency or config.shards,
            ), self._lifecycle.stopping)
        else:
            self._pool = WorkerPool(*args)
        self._ledger = PartitionLedger(
            config.max_in_flight_per_partition, config.resume_threshold, self._counters,
            max_bytes=config.max_in_flight_bytes,
            # librdkafka adds a NUL to the metadata, and the broker counts it.
            max_metadata_bytes=(
                max(0, config.offset_metadata_max_bytes - 1) if config.offset_map else None
            ),
        )
        self._transactions = None if self._outputs is None else TransactionalCommits(
            consumer, transactional_producer, self._ledger, self._outputs, self._counters,
        )
        self._hooks = ExecutorHooks(
            consumer, self._ledger, self._pool, stopping=self._lifecycle.stopping,
            revoke_timeout_s=config.revoke_timeout_ms / 1000, transactions=self._transactions,
            counters=self._counters,
        )
        self._subscribed = False
        self._next_commit = 0.0
        #: The periodic commit in flight (its answer, offsets and when it was sent): one at a
        #: time.
        self._pending_commit: tuple[PendingCommit, dict[TopicPartition, Any], float] | None = None
        self._next_stuck_check = 0.0
        self._task: Any = None  # run_async() started by ``async with``
        self._stuck_warned: set[tuple[TopicPartition, int, int]] = set()

    def __repr__(self) -> str:
        c = self.config
        return (
            f"ShardedExecutor(shards={c.shards}, ordering={c.ordering!r}, "
            f"failure_policy={c.failure_policy!r}, "
            f"exactly_once={self._transactions is not None}, "
            f"state={self._lifecycle.state.value!r})"
        )

    # -- public API ---------------------------------------------------------------------------

    def subscribe(
        self, topics: Collection[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        """Subscribe the consumer, with ``listener`` (if any) called after the executor's own.

        Mirrors ``KafkaConsumer.subscribe``. Use this rather than subscribing the consumer
        directly with a listener, so the executor can finish and commit revoked partitions.
        """
        check_listener(listener)
        self._consumer.subscribe(
            topics=list(topics), pattern=pattern, listener=ChainedListener(
                self._hooks, listener if self._gate is None else self._gate.listener(listener)
            ),
        )
        self._subscribed = True

    def stop(self) -> None:
        """Ask :meth:`run` to stop gracefully; returns at once (safe from a signal handler).

        :meth:`run` then stops taking records, drops queued ones, lets running handlers
        finish within ``drain_timeout_ms``, commits the watermark and closes the consumer.
        """
        self._lifecycle.stop()

    def stats(self) -> ExecutorStats:
        """Counters so far and gauges now (see :class:`ExecutorStats`)."""
        in_flight, paused = self._ledger.gauges()
        queued, running = self._pool.sizes()
        return self._counters.snapshot(
            in_flight=in_flight, queued=queued, running=running, paused_partitions=paused,
            in_flight_bytes=self._ledger.held_bytes(),
        )

    def budget_stats(self) -> dict[str, dict[int, BudgetStats]]:
        """Per resource and level (highest first), see BudgetStats; empty without budgets."""
        return {} if self._gate is None else self._gate.stats()

    def run(self, handle_signals: bool | None = None) -> None:
        """Poll and dispatch until :meth:`stop` (or a failure under the ``"stop"`` policy).

        Blocks the calling thread, which becomes the only thread that uses the consumer.
        Called from the main thread, Ctrl-C (SIGINT) and SIGTERM stop it gracefully as
        :meth:`stop` does (running handlers finish within ``drain_timeout_ms``, the watermark
        is committed, the consumer closed) and ``run`` returns; Ctrl-C pressed again while it
        stops raises KeyboardInterrupt at once. ``handle_signals=False`` leaves the signals to
        the application; ``True`` insists on handling them (IllegalStateError off the main
        thread); the default ``None`` handles them on the main thread only. Raises
        HandlerError if a record failed under the ``"stop"`` policy (or its dead letter or
        callback failed), after committing what was safely done.
        """
        self._lifecycle.run(
            handle_signals, self._pool, self._handler,
            start=self._start, step=self._poll_once, drained=self._commit, close=self._close,
        )
        self._raise_outcome()

    async def run_async(self) -> None:
        """:meth:`run` on the running event loop, for an aiokafka consumer started on it.

        ``async def`` handlers run as tasks on this loop (at most ``async_concurrency`` at
        once; no thread), plain functions on the worker threads; key order, commits, pauses,
        retries, dead letters and metrics as in :meth:`run`. Returns after :meth:`stop`, once
        drained, committed and closed; cancelled, does the same, then raises CancelledError.
        Raises HandlerError as :meth:`run` does; signals are the application's. No exactly-once
        (IllegalStateError: its transactions block their thread, here the loop; docs/asyncio.md).
        """
        from priority_kafka.executor._async import run_on_loop

        await run_on_loop(self)

    async def __aenter__(self) -> ShardedExecutor:
        """:meth:`run_async` as a task of the running loop, until the block ends: then it is
        stopped, drained, committed and closed (raising what the run raised)."""
        from priority_kafka.executor._async import start_on_loop

        self._task = start_on_loop(self)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        from priority_kafka.executor._async import stop_on_loop

        await stop_on_loop(self, self._task)

    def _raise_outcome(self) -> None:
        """After the run: the fatal transaction error, or the failure under "stop", if any."""
        fatal = None if self._transactions is None else self._transactions.fatal
        if fatal is not None:
            raise fatal
        self._lifecycle.raise_failure(self._pool.failure, self.config.failure_policy)

    # -- the polling thread -------------------------------------------------------------------

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
        if self._dead_letters is not None:
            self._handler.dead_letter_producer = self._dead_letters()
        if self._transactions is not None:
            self._transactions.start()
        if not isinstance(self._pool, LoopPool):  # the pool's loop runs an async handler
            self._handler.start()
        self._pool.start()

    def _poll_once(self) -> None:
        timeout, paused = self._poll_timeout()
        progress = self._pool.handed_back
        try:
            batch = self._consumer.poll(timeout_ms=timeout)
        except DeserializationError as error:
            batch = self._undeserializable(error)
        batch = self._hooks.owned(batch)
        if batch:
            fresh = self._fresh(batch)
            if fresh:
                batch = self._take_on(batch, fresh, fetch_committed(self._consumer, fresh))
            self._dispatch(batch)
        elif paused:
            self._pool.wait_progress(
                progress, min(PAUSED_WAIT_S, self.config.poll_timeout_ms / 1000)
            )
        self._pool.reclaim()  # a record running long must not hold back the rest of its batch
        self._tend()

    def _poll_timeout(self) -> tuple[int, bool]:
        """How long the next poll may wait, and whether a partition is paused."""
        paused = self._ledger.gauges()[1] > 0
        timeout = self.config.poll_timeout_ms
        if paused:
            # What ends a pause is the workers' progress, which the client's poll does not see
            # (a level whose partitions are all paused sleeps its timeout out).
            timeout = int(min(timeout, PAUSED_WAIT_S * 1000, self._pool.drain_s() * 1000))
        return timeout, paused

    def _undeserializable(self, error: DeserializationError) -> dict[TopicPartition, list[Any]]:
        """The record goes to the failure policy like a failed handler; consumption goes on
        past it, while the ledger keeps commits below it until the policy is done."""
        tp = TopicPartition(error.topic, error.partition)
        self._consumer.seek(tp, error.offset + 1)
        return {tp: [Undeserializable(error)]}

    def _fresh(self, batch: Mapping[TopicPartition, list[Any]]) -> list[TopicPartition]:
        """The partitions of ``batch`` whose records start an epoch that must read its commit."""
        if self._ledger.carries_maps or self._transactions is not None:
            return self._ledger.untracked(batch)
        return []

    def _dispatch(self, batch: Mapping[TopicPartition, list[Any]]) -> None:
        """Track a poll's records in the ledger and queue them in the pool."""
        self._pool.push([
            (self._level(tp), tp, epoch, records)
            for tp, epoch, records in self._ledger.receive(batch)
        ])

    def _tend(self) -> None:
        """After each poll: pause and resume, commit answers and periodic commits, stuck
        handlers."""
        change = self._ledger.flow()
        if change.pause:
            self._consumer.pause(*change.pause)
        if change.resume:
            self._consumer.resume(*change.resume)
        now = time.monotonic()
        self._commit_answered()
        if now >= self._next_commit:
            self._commit(wait=False)
            self._next_commit = now + self.config.commit_interval_ms / 1000
        if now >= self._next_stuck_check:
            self._warn_stuck()
            self._next_stuck_check = now + _STUCK_CHECK_S

    def _warn_stuck(self) -> None:
        """Say so, once per record, when a handler has run longer than stuck_warning_ms."""
        for running in self._pool.running_longer_than(self.config.stuck_warning_ms / 1000):
            tp, offset, epoch, seconds = running
            key = (tp, offset, epoch)
            if key in self._stuck_warned:
                continue
            self._stuck_warned.add(key)
            self._counters.add("stuck_warnings")
            log.warning(
                "record %s[%s]@%s has been running for %.0f s: commits of its partition wait "
                "for it, and the partition pauses after max_in_flight_per_partition=%s more",
                tp.topic, tp.partition, offset, seconds,
                self.config.max_in_flight_per_partition,
            )

    def _level(self, tp: TopicPartition) -> int:
        """The priority level of a partition's records."""
        level = self._level_cache.get(tp.topic)
        if level is None:
            level = self._level_cache[tp.topic] = self._levels.level_of(tp.topic)
        return level

    def _take_on(
        self, batch: Mapping[TopicPartition, list[Any]], partitions: list[TopicPartition],
        committed: Mapping[TopicPartition, Any] | Exception,
    ) -> Mapping[TopicPartition, list[Any]]:
        """See :func:`~priority_kafka.executor._take_on.take_on`."""
        return take_on(self._consumer, self._ledger, self._counters,
                       self._transactions is not None, batch, partitions, committed)

    def _keep(self, record: Any, result: Any) -> None:
        """Exactly-once: keep what a handler returned until a commit covers its record."""
        assert self._outputs is not None
        self._outputs.keep(
            TopicPartition(record.topic, record.partition), record.offset, outputs_of(result)
        )

    def _commit(self, *, wait: bool = True) -> None:
        """Commit what is done; ``wait=False`` (the periodic commit) sends it in the background
        unless one is still in flight: a blocking commit kept the polling thread from polling
        for every level's round trip to its coordinator (0.3-1.5 s under load, the cause of
        the cooperative-join flake; docs/rebalancing.md)."""
        if self._transactions is not None:
            failed = self._transactions.commit(self._consumer.assignment())
            if failed:
                self._rewind(failed)
            if self._transactions.fatal is not None:
                self._lifecycle.stop()
            return
        if self._pending_commit is not None and not wait:
            return
        # A commit waited for supersedes one in flight: it reaches the same coordinators later.
        self._pending_commit = None
        while True:
            offsets = self._ledger.committable(self._consumer.assignment())
            if not offsets:
                return
            if not wait:
                self._pending_commit = (
                    self._consumer.commit_in_background(offsets), offsets, time.monotonic())
                self._commit_answered()  # a client that commits synchronously answered already
                return
            try:
                self._consumer.commit(offsets)
            except Exception as exc:
                if self._commit_refused(offsets, exc):
                    continue
                return
            self._ledger.committed(offsets)
            return

    def _commit_answered(self) -> None:
        """Take the answer of the periodic commit in flight, if it came (polling thread); one
        unanswered for ``commit_timeout_ms`` failed (a frozen coordinator: kafka-python's own
        bound is its ``request_timeout_ms``, 305 s by default), and the next may be sent."""
        pending = self._pending_commit
        if pending is None:
            return
        answer, offsets, sent = pending
        if not answer.is_done:
            waited_s = time.monotonic() - sent
            if waited_s < self.config.commit_timeout_ms / 1000:
                return
            self._pending_commit = None
            self._commit_refused(offsets, TimeoutError(
                f"the executor's offset commit got no answer within {waited_s:.1f} s "
                f"(commit_timeout_ms={self.config.commit_timeout_ms})"))
            return
        self._pending_commit = None
        if answer.exception is None:
            self._ledger.committed(offsets)
        else:
            self._commit_refused(offsets, answer.exception)

    def _commit_refused(self, offsets: dict[TopicPartition, Any], error: BaseException) -> bool:
        """Note a failed commit; True if it may be tried again at once (smaller maps)."""
        if isinstance(error, MetadataTooLarge):  # the broker's limit is lower: smaller maps
            return self._ledger.metadata_refused(error)
        # A rebalance raced the commit; the next one catches up.
        self._ledger.commit_failed(offsets, error)
        return False

    def _rewind(self, partitions: frozenset[TopicPartition]) -> None:
        """A transaction of ``partitions`` failed: handle all since their last commit again."""
        assert self._transactions is not None
        points = self._transactions.restart_points(partitions)
        self._pool.discard(partitions)
        self._pool.wait_idle(partitions, self.config.revoke_timeout_ms / 1000)
        paused = self._ledger.revoke(partitions).paused
        self._transactions.forget(partitions)
        assigned = self._consumer.assignment()
        for tp, offset in points.items():
            if tp in assigned:
                self._consumer.seek(tp, offset)
        if paused & assigned:
            self._consumer.resume(*(paused & assigned))

    def _close(self) -> None:
        """The end of a run (after the drain and the final commit, or a failure): close the
        consumer, if it is the executor's to close, and the transactional producer."""
        if self._close_consumer:
            try:
                self._consumer.close()
            except Exception:  # closing must not hide the run's own outcome
                log.exception("closing the consumer failed")
        if self._transactions is not None:
            self._transactions.close()
