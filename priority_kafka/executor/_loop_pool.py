"""LoopPool: an ``async def`` handler's records under ``run()``, as tasks of a loop of its own.

Before, each record of an async handler took a worker thread, which handed it to the handler's
event loop (``run_coroutine_threadsafe``) and slept until it came back: two thread wake-ups and
a future per record on top of the threads' own hand-offs (9,902-14,006 records/s at 1 ms x 64
against the threads' 23,186-23,344). Here the records wait in the loop's
:class:`~priority_kafka.executor._tasks.TaskPool` (the lanes, levels and one task per running
slot of ``run_async()``), on one event-loop thread this pool owns, whose timers fire to the
microsecond (:func:`~priority_kafka._workers._loops.new_event_loop`). The polling thread keeps
its blocking poll and the rebalance listener; what crosses between the threads is a poll's
records (one ``call_soon_threadsafe`` per poll, not per record), the rare discard and
wait (revoke, rewind, stop: a call on the loop awaited with a bound) and a wake-up of the
polling thread only while it waits for progress (a paused partition). Completions are marked
in the ledger by the loop (its own lock), which the polling thread reads after each poll.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Collection, Iterable
from typing import Any, TypeVar

from priority_kafka._structs import TopicPartition
from priority_kafka._workers import Failure, Item, Running
from priority_kafka._workers._loops import loop_thread
from priority_kafka.executor._tasks import TaskPool

__all__ = ["LoopPool"]

log = logging.getLogger("priority_kafka.executor")

#: How long a discard waits for a loop that a handler blocks (the discard still applies, in
#: order, once the loop runs again).
_LOOP_CALL_S = 5.0

_T = TypeVar("_T")


class LoopPool:
    """An async handler's records as tasks of the :class:`TaskPool` that ``tasks`` makes, on
    an event-loop thread of the pool's own, in lanes and levels as the worker threads run them.

    The worker pool's interface where the executor, its hooks and the lifecycle need it, from
    any thread but the loop's. ``stopping`` (the lifecycle's) is passed on to the loop at the
    first discard or wait after it is set: retry waits are cut short there.
    """

    def __init__(
        self, tasks: Callable[[asyncio.Event, Callable[[], None]], TaskPool],
        stopping: threading.Event,
    ) -> None:
        #: Makes the TaskPool on the loop (from its ``stopping`` and ``ended``).
        self._make_tasks = tasks
        self._stopping = stopping
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: TaskPool | None = None
        self._loop_stopping: asyncio.Event | None = None
        self._progress = threading.Event()

    # -- the loop's thread --------------------------------------------------------------------

    def start(self) -> None:
        """Start the event-loop thread (returns once its task pool is ready)."""

        def setup() -> None:
            self._loop_stopping = asyncio.Event()
            self._tasks = self._make_tasks(self._loop_stopping, self._ended)

        self._loop, self._thread = loop_thread(setup)

    def _ended(self) -> None:
        """A record ended (on the loop): wake the polling thread if it waits for progress."""
        if self._waiting:
            self._waiting = False
            self._progress.set()

    _waiting = False

    def _on_loop(self, function: Callable[..., _T], *args: Any, timeout: float) -> _T:
        """``function(*args)`` on the loop, waited for up to ``timeout`` (TimeoutError)."""
        assert self._loop is not None
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def call() -> None:
            if self._stopping.is_set() and self._loop_stopping is not None:
                self._loop_stopping.set()
            try:
                done.set_result(function(*args))
            except BaseException as error:
                done.set_exception(error)

        self._loop.call_soon_threadsafe(call)
        return done.result(timeout)

    # -- what the executor calls --------------------------------------------------------------

    @property
    def halted(self) -> bool:
        """Whether a record was not done: nothing is dispatched any more."""
        return self._tasks is not None and self._tasks.halted

    @property
    def failure(self) -> Failure | None:
        """The first record that was not done; dispatch halted with it."""
        return None if self._tasks is None else self._tasks.failure

    @property
    def handed_back(self) -> int:
        """Records ended so far (see :meth:`wait_progress`)."""
        return 0 if self._tasks is None else self._tasks.handed_back

    def push(self, items: Iterable[Item]) -> None:
        """Queue ``(level, partition, completion, records)`` items, in order, on the loop
        (one hand-over per poll); tasks start there for what may run."""
        if self._tasks is None or self._tasks.halted:
            return
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._tasks.push, list(items))

    def discard(self, partitions: Collection[TopicPartition] | None = None) -> int:
        """Drop queued records of ``partitions`` (None: all), on the loop, before anything
        queued after; return how many (0 if a handler blocks the loop past
        ``_LOOP_CALL_S``: the discard then applies once it is free)."""
        if self._tasks is None:
            return 0
        try:
            return self._on_loop(self._tasks.discard, partitions, timeout=_LOOP_CALL_S)
        except TimeoutError:
            log.warning("the async handlers' event loop did not answer within %.0f s (a "
                        "handler blocking it?): queued records are dropped once it does",
                        _LOOP_CALL_S)
            return 0

    def wait_idle(self, partitions: Collection[TopicPartition] | None, budget_s: float) -> bool:
        """Wait up to ``budget_s`` until no task runs a record of ``partitions`` (None: any).
        Returns whether it came to that; the records that finished are marked by then."""
        if self._tasks is None:
            return True
        assert self._loop is not None
        waiting = asyncio.run_coroutine_threadsafe(
            self._wait_idle(partitions, budget_s), self._loop
        )
        try:
            return waiting.result(budget_s + _LOOP_CALL_S)
        except TimeoutError:
            waiting.cancel()
            return False

    async def _wait_idle(
        self, partitions: Collection[TopicPartition] | None, budget_s: float
    ) -> bool:
        if self._stopping.is_set() and self._loop_stopping is not None:
            self._loop_stopping.set()
        assert self._tasks is not None
        return await self._tasks.wait_idle(partitions, budget_s)

    def wait_progress(self, seen: int, budget_s: float) -> None:
        """Wait up to ``budget_s`` until a record ends after :attr:`handed_back` was ``seen``;
        return at once if one has, or if none runs."""
        tasks = self._tasks
        if tasks is None or tasks.handed_back != seen or not tasks.sizes()[1]:
            return
        self._progress.clear()
        self._waiting = True
        # A record that ended between the check above and the flag found no one waiting.
        if tasks.handed_back == seen:
            self._progress.wait(budget_s)
        self._waiting = False

    def reclaim(self) -> int:
        """Nothing to give back: a task takes one record at a time."""
        return 0

    def drain_s(self) -> float:
        """About how long the tasks need for the records queued now."""
        return 0.0 if self._tasks is None else self._tasks.drain_s()

    def running_longer_than(self, seconds: float) -> list[Running]:
        """The records running for more than ``seconds``, with how long they have run."""
        return [] if self._tasks is None else self._tasks.running_longer_than(seconds)

    def sizes(self) -> tuple[int, int]:
        """Records queued, and running now."""
        return (0, 0) if self._tasks is None else self._tasks.sizes()

    def close(self, join_s: float = 0.5) -> None:
        """Cancel the tasks still running (past the drain budget), stop the loop and its
        thread (one that a handler blocks keeps its daemon)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or loop.is_closed():
            return
        closing = asyncio.run_coroutine_threadsafe(self._close(), loop)
        try:
            closing.result(join_s + _LOOP_CALL_S)
        except (TimeoutError, concurrent.futures.CancelledError):
            log.warning("the async handlers' event loop did not close within %.1f s; its "
                        "thread is left to end with the process", join_s + _LOOP_CALL_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=join_s)

    async def _close(self) -> None:
        assert self._tasks is not None and self._loop is not None
        await self._tasks.close()
        await self._loop.shutdown_default_executor()  # failure policies' threads
