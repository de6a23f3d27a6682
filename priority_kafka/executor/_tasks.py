"""TaskPool: an async handler's records as tasks on the running loop (``run_async()``).

The records wait in the same :class:`~priority_kafka.scheduling.LaneQueue` as the worker
threads' (one record at a time per lane, levels by their reserved share); each record taken
runs in a task of the loop, at most ``limit`` at once; a task that ended a record takes the
next one that may run (one task per running slot, not per record). Everything here runs on
the loop's thread: no lock. A record that is not done halts dispatch at once, as in
:class:`~priority_kafka._workers.WorkerPool`, so nothing of its lane (nor anything
else) overtakes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, cast

from priority_kafka._structs import TopicPartition
from priority_kafka._workers import (
    Completion,
    Counters,
    Failure,
    Item,
    Outcome,
    RecordHandler,
    Result,
    Running,
    Undeserializable,
)
from priority_kafka.scheduling import Batch, LaneQueue
from priority_kafka.sharding import Ordering

__all__ = ["TASK_BATCH", "TaskPool"]

#: Most records a task takes at once (it runs them in turn).
TASK_BATCH = 16


class TaskPool:
    """At most ``limit`` records of ``handler`` (async) running as tasks of the running loop.

    The worker pool's interface where the executor needs it (``push``, ``discard``,
    ``wait_idle`` and ``wait_progress`` (awaited), ``sizes``, ``running_longer_than``,
    ``halted``, ``failure``).
    ``stopping`` cuts retry waits short; ``ended`` (if given) is called, on the loop, after
    each record ends (``run()``'s :class:`~priority_kafka.executor._loop_pool.LoopPool` wakes
    its polling thread with it)."""

    def __init__(
        self,
        weights: Mapping[int, int],
        ordering: Ordering,
        handler: RecordHandler,
        counters: Counters,
        limit: int,
        stopping: asyncio.Event,
        ended: Callable[[], None] | None = None,
    ) -> None:
        self._queue = LaneQueue(weights, ordering)
        self._handler = handler
        self._counters = counters
        self._limit = limit
        self._stopping = stopping
        self._on_end = ended
        self._loop = asyncio.get_running_loop()
        #: Each running task: its partition, record, epoch and start time.
        self._tasks: dict[asyncio.Task[None], tuple[TopicPartition, Any, int, float]] = {}
        self._ended = asyncio.Event()  # a record ended since the event was cleared
        self.handed_back = 0
        self._starts = 0  # records started, by any task (see _run)
        self._handled = 0  # records handled and not counted yet (see _flush_counts)
        self._closed = False
        self.halted = False
        #: The first record that was not done; dispatch halted with it.
        self.failure: Failure | None = None

    def push(self, items: Iterable[Item]) -> None:
        """Queue ``(level, partition, completion, records)`` items, in order (nothing once halted),
        and start tasks for what may run."""
        if self.halted:
            return
        for level, tp, group, records in items:
            self._queue.push(level, tp, group, records)
        self._fill()

    def _fill(self) -> None:
        """Start a task for each batch that may run now, up to the limit."""
        tasks, start = self._tasks, self._loop.create_task
        while len(tasks) < self._limit:
            batch = self._next()
            if batch is None:
                return
            task = start(self._work(batch))
            tasks[task] = _IDLE

    def _next(self) -> Batch | None:
        """The next records that may run, lane after lane (None if none may): the task's share
        of the queue, at most :data:`TASK_BATCH`. Each task taking its share keeps every slot
        busy, at a take and a finish per batch instead of per record, and a record waits behind
        about as many others as it would in the queue (a stuck one holds up at most
        ``TASK_BATCH - 1``)."""
        if self.halted or self._closed:
            return None
        return self._queue.take(min(TASK_BATCH, self._queue.queued // self._limit))

    async def _work(self, batch: Batch) -> None:
        """Run ``batch``, then the next ones that may run, in this task: one task per running
        slot rather than per record (a task's creation and its first scheduling cost about as
        much as the rest of a record's bookkeeping together)."""
        task = asyncio.current_task()
        assert task is not None
        while True:
            started = time.monotonic()
            try:
                await self._run(task, batch)
            finally:  # also when cancelled (close()): what it did not start goes back
                self._queue.finish(batch, time.monotonic() - started)
                self.handed_back += 1
                self._ended.set()  # a record ended (its completion counted): see wait_progress
                if self._on_end is not None:
                    self._on_end()
            self._tasks[task] = _IDLE
            batch = self._next()  # type: ignore[assignment]
            if batch is None:
                self._leave(task)
                return

    async def _run(self, task: asyncio.Task[None], batch: Batch) -> None:
        """Run the records of ``batch`` in order until it ends, or a record is not done."""
        tasks, pop, handler = self._tasks, batch.records.popleft, self._handler
        for lane, lane_group, count in batch.runs:
            tp, group = cast(TopicPartition, lane.source), cast(Completion, lane_group)
            for _ in range(count):
                if self.halted:
                    return  # its lanes were discarded: nothing is given back
                record = pop()
                if lane.group is not group:
                    continue  # discarded (revoked, a halt): not run
                self._starts += 1
                mark = self._starts
                tasks[task] = (tp, record, group.epoch, time.monotonic())
                try:
                    try:
                        if type(record) is Undeserializable:
                            raise record.error
                        await handler.call_on_loop(record)
                        result = _HANDLED
                    except Exception as error:
                        result = await handler.process_async(
                            record, (tp.topic, tp.partition, record.offset), error,
                            self._stopping,
                        )
                except BaseException as error:
                    # Cancelled by close() (a stop past drain_timeout_ms): not done, not a
                    # failure; it comes again. Anything else (a handler raising CancelledError
                    # of its own, or KeyboardInterrupt) fails the record: it is not done, and
                    # must not pass unseen.
                    if not self._closed:
                        self._end(tp, group, record, Result(Outcome.FAILED, error, 1))
                    self._leave(task)
                    raise
                self._end(tp, group, record, result)
                if self._starts == mark:
                    # No other record started meanwhile, so the handler may not have suspended:
                    # let the loop run its other callbacks first, as a new task would have (a
                    # handler that never suspends must not keep the poll loop, and a stop,
                    # waiting). Any suspension had let them run, and costs no yield here.
                    try:
                        await asyncio.sleep(0)
                    except BaseException:  # close(): the rest of the batch goes back
                        self._leave(task)
                        raise

    def _leave(self, task: asyncio.Task[None]) -> None:
        """A task holds no record any more: it ends."""
        self._tasks.pop(task, None)
        self._flush_counts()
        self._ended.set()

    def _end(self, tp: TopicPartition, group: Completion, record: Any, result: Result) -> None:
        if result is _HANDLED:
            self._handled += 1
            if self._handled >= _COUNT_EVERY:
                self._flush_counts()
        else:
            self._counters.add(result.outcome.value)
        if result.outcome.done:
            if group.forgotten:  # revoked while running: the new owner handles it again
                self._counters.add("stale_completions")
            group.complete((record.offset,))
        elif not self.halted:
            # Nothing queued may overtake a record that is not done: halt dispatch; the
            # executor stops and the rest comes again.
            self.halted = True
            self.failure = Failure(tp, record, result)
            self._queue.discard()

    def _flush_counts(self) -> None:
        """Add the records handled since the last flush to the counters (once per
        ``_COUNT_EVERY``, and whenever a task finds nothing to run)."""
        if self._handled:
            self._counters.add("handled", self._handled)
            self._handled = 0

    def discard(self, partitions: Collection[TopicPartition] | None = None) -> int:
        """Drop queued records of ``partitions`` (None: all); return how many. Their running
        tasks finish (their completions of a revoked epoch do not count)."""
        return self._queue.discard(partitions)

    async def wait_idle(
        self, partitions: Collection[TopicPartition] | None, budget_s: float
    ) -> bool:
        """Wait up to ``budget_s`` until no task runs a record of ``partitions`` (None: any).
        Returns whether it came to that."""
        deadline = time.monotonic() + budget_s
        while any(partitions is None or tp in partitions for tp, *_ in self._tasks.values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._ended.clear()
            try:
                await asyncio.wait_for(self._ended.wait(), remaining)
            except TimeoutError:
                return False
        return True

    async def wait_progress(self, seen: int, budget_s: float) -> None:
        """Wait up to ``budget_s`` until a record ends after :attr:`handed_back` was ``seen``
        (its record is marked done by then, so a paused partition may resume); return at once
        if one has, or if none runs (nothing is queued then: :meth:`push` starts what may)."""
        if self.handed_back != seen or not self._tasks:
            return
        self._ended.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), budget_s)

    def drain_s(self) -> float:
        """About how long the tasks need for the records queued now (see WorkerPool)."""
        return self._queue.queued * self._queue.shares.fastest() / self._limit

    def running_longer_than(self, seconds: float) -> list[Running]:
        """The records running for more than ``seconds``, with how long they have run."""
        now = time.monotonic()
        # A copy first: under run() another thread asks (list() of a dict is one step).
        return [
            Running(tp, record.offset, epoch, now - started)
            for tp, record, epoch, started in list(self._tasks.values())
            if now - started > seconds
        ]

    def sizes(self) -> tuple[int, int]:
        """Records queued, and running now."""
        return self._queue.queued, len(self._tasks)

    async def close(self) -> None:
        """Cancel the tasks still running (past the drain budget) and wait for them."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


_HANDLED = Result(Outcome.HANDLED, None, 1)
#: What a task's entry holds between two batches (no record: never running long, nor of a
#: partition waited for).
_IDLE = cast(tuple[TopicPartition, Any, int, float], (None, None, 0, math.inf))
#: Handled records are added to the counters this many at a time (and when a task ends).
_COUNT_EVERY = 256
