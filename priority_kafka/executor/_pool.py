"""The shared pool of worker threads and the lanes they take records from.

Records wait in a :class:`~priority_kafka.scheduling.LaneQueue` (one at a time per lane, levels
by their reserved share). A worker takes the next record, runs it, and reports
``(work, outcome, error)`` on a queue the polling thread drains. A record that is not done
halts dispatch at once, atomically with its finish, so nothing of its lane (nor anything else)
overtakes it; the executor then stops.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, NamedTuple

from priority_kafka._kafka import TopicPartition
from priority_kafka.executor._handling import Result
from priority_kafka.scheduling import LaneQueue

__all__ = ["Completion", "Work", "WorkerPool"]


class Work(NamedTuple):
    """A record handed to the workers, with what its completion must be matched against."""

    tp: TopicPartition
    offset: int
    epoch: int
    record: Any


class Completion(NamedTuple):
    """A worker's report on one record."""

    work: Work
    result: Result


class WorkerPool:
    """``shards`` threads running ``run(work) -> Result`` on queued records.

    Thread use: :meth:`push`, :meth:`discard`, :meth:`running`, :meth:`completions` from the
    polling thread or a rebalance hook; the queue and the running map are guarded by one
    Condition, held for one whole poll batch at a time.
    """

    def __init__(
        self,
        weights: Mapping[int, int],
        shards: int,
        run: Callable[[Work], Result],
    ) -> None:
        self._queue: LaneQueue[Work] = LaneQueue(weights)
        self._ready = threading.Condition()
        self._shards = shards
        self._run = run
        self._threads: list[threading.Thread] = []
        # Worker thread id -> the record it runs and when it started.
        self._running: dict[int, tuple[Work, float]] = {}
        self._halted = False
        self._closed = False
        self._completions: queue.SimpleQueue[Completion] = queue.SimpleQueue()

    def start(self) -> None:
        """Start the worker threads."""
        for index in range(self._shards):
            thread = threading.Thread(
                target=self._worker, name=f"priority-kafka-worker-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def push(self, items: Iterable[tuple[int, Any, Work]]) -> None:
        """Queue ``(level, lane, work)`` items, in order (nothing once halted)."""
        with self._ready:
            if self._halted:
                return
            count = 0
            for level, lane, work in items:
                self._queue.push(level, lane, work)
                count += 1
            self._ready.notify(count)

    def discard(self, partitions: Collection[TopicPartition] | None = None) -> int:
        """Drop queued records of ``partitions`` (None: all); return how many."""
        with self._ready:
            return len(self._queue.discard(lambda w: partitions is None or w.tp in partitions))

    def running(self, partitions: Collection[TopicPartition] | None = None) -> bool:
        """Whether a record of ``partitions`` (None: any) is running now."""
        with self._ready:
            return any(
                partitions is None or work.tp in partitions for work, _ in self._running.values()
            )

    def running_longer_than(self, seconds: float) -> list[tuple[Work, float]]:
        """The records running for more than ``seconds``, with how long they have run."""
        now = time.monotonic()
        with self._ready:
            return [
                (work, now - started) for work, started in self._running.values()
                if now - started > seconds
            ]

    def wait_idle(
        self,
        partitions: Collection[TopicPartition] | None,
        budget_s: float,
        settle: Callable[[float], None],
    ) -> bool:
        """Wait up to ``budget_s`` until nothing of ``partitions`` runs; ``settle(step_s)``
        applies completions meanwhile and, once nothing runs, every one still queued. Discard
        their queued records first. Returns whether everything finished."""
        deadline = time.monotonic() + budget_s
        while self.running(partitions):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            settle(min(remaining, 0.1))
        settle(0.0)  # the completions of records that ended since the last settle
        return True

    def completions(self, block_s: float = 0.0) -> list[Completion]:
        """Every completion reported so far, waiting up to ``block_s`` for the first."""
        found: list[Completion] = []
        try:
            if block_s > 0:
                found.append(self._completions.get(timeout=block_s))
            while True:
                found.append(self._completions.get_nowait())
        except queue.Empty:
            return found

    def sizes(self) -> tuple[int, int]:
        """Records queued and running now."""
        with self._ready:
            return self._queue.queued, self._queue.running

    def close(self, join_s: float = 0.5) -> None:
        """Stop the workers once their current record ends (a stuck one keeps its daemon)."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(timeout=join_s)

    def _worker(self) -> None:
        ident = threading.get_ident()
        while True:
            with self._ready:
                while (task := self._queue.next()) is None:
                    if self._closed:
                        return
                    self._ready.wait()
                started = time.monotonic()
                self._running[ident] = (task.item, started)
            result = self._run(task.item)
            with self._ready:
                if not result.outcome.done:
                    # Nothing queued may overtake a record that is not done (the next record of
                    # its lane least of all): halt dispatch; the executor stops and the rest
                    # comes again.
                    self._halted = True
                    self._queue.discard(lambda _: True)
                # Reported before it stops counting as running, so a wait_idle() that sees
                # nothing running finds every completion queued.
                self._completions.put(Completion(task.item, result))
                del self._running[ident]
                self._queue.finish(task, time.monotonic() - started)
