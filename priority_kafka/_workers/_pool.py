"""The shared pool of worker threads and the lanes they take records from.

Records wait in a :class:`~priority_kafka.scheduling.LaneQueue` (one worker at a time per lane,
levels by their reserved share). A worker takes a *batch* (runs of records of one level, lane
after lane), calls the handler on each record in turn, marks the done ones in their group's
:class:`Completion` itself (the ledger's :class:`~priority_kafka.offsets.PartitionOffsets` of
the partition's epoch, or a share executor's acquisition), and hands the batch back; so the lock,
the wake-up and the accounting cost once per batch, not once per record. A batch holds as many
records as the level's handler runs in about a slice (:data:`SLICE_S`, longer for pools of more
than :data:`SLICE_SHARDS` workers; one record of a slow handler, up to :data:`MAX_BATCH` of a
fast one), and a worker that passes the slice anyway hands back the
records it has not started, so a slow record delays no other lane and no higher level for long;
while a worker is still inside a record past the slice (a handler slower than its level's
estimate, or stuck), :meth:`WorkerPool.reclaim`, which the polling thread calls on every loop,
gives the records of its batch that it has not started back to their lanes for other workers.

A record that is not done halts dispatch at once, atomically with the hand-back, so nothing of
its lane (nor anything else) overtakes it; the executor then stops (:attr:`WorkerPool.failure`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple, Protocol, cast

from priority_kafka._structs import TopicPartition
from priority_kafka._workers._handling import RecordHandler, Result, Undeserializable
from priority_kafka._workers._stats import Counters
from priority_kafka.scheduling import Batch, LaneQueue
from priority_kafka.sharding import Ordering

__all__ = [
    "MAX_BATCH", "MAX_SLICE_S", "SLICE_S", "SLICE_SHARDS", "Completion", "Failure", "Item",
    "Running", "WorkerPool",
]

#: About how long a worker of a pool of :data:`SLICE_SHARDS` runs one batch before it hands
#: back the records it has not started.
SLICE_S = 0.005
#: Pools larger than this run longer slices, in proportion (at most :data:`MAX_SLICE_S`): a
#: free worker comes as often (every ``slice / shards``, about 0.3 ms), and the hand-offs that
#: cost most of a 1 ms handler's time on 64 workers come fewer.
SLICE_SHARDS = 16
MAX_SLICE_S = 0.02
#: Most records in one batch (the hand-off is amortised long before).
MAX_BATCH = 256


class Completion(Protocol):
    """What a pushed group of records counts its completions towards: all the pools use of the
    ledger's :class:`~priority_kafka.offsets.PartitionOffsets` (a partition's epoch), and all a
    share executor's acquisition has to offer."""

    @property
    def epoch(self) -> int:
        """Which assignment of the partition (reported with a record running long)."""

    @property
    def forgotten(self) -> bool:
        """Whether completions no longer count (the partition was revoked meanwhile)."""

    def complete(self, offsets: Iterable[int]) -> None:
        """Mark ``offsets`` done (any thread; marking one twice is harmless)."""


#: What :meth:`WorkerPool.push` queues: ``(level, partition, completion, records)``.
Item = tuple[int, TopicPartition, Completion, list[Any]]


class Failure(NamedTuple):
    """A record that is not done (failed, or abandoned by a stop), and its outcome."""

    tp: TopicPartition
    record: Any
    result: Result


class Running(NamedTuple):
    """A record a worker is running, and for how long it has run."""

    tp: TopicPartition
    offset: int
    epoch: int
    seconds: float


class _Slot:
    """What one worker holds: its batch, and the record it runs now and since when.

    Written by its worker without the lock (the record after its start time, so a reader never
    sees a record with an earlier record's start); read by the polling thread. ``pending`` is
    the epoch the worker marks records in and the offsets it finished there and has not marked
    yet (it marks them once the epoch changes in its batch, or the batch ends), in one tuple so
    a reader never pairs one epoch with another's offsets."""

    __slots__ = ("batch", "epoch", "pending", "record", "started", "tp")

    def __init__(self) -> None:
        self.batch: Batch | None = None
        self.record: Any = None
        self.started = 0.0
        self.tp: Any = None
        self.epoch = 0
        self.pending: tuple[Completion, list[int]] | None = None


class WorkerPool:
    """``shards`` threads running ``handler`` on queued records.

    Thread use: :meth:`push`, :meth:`discard`, :meth:`running`, :meth:`wait_idle` from the
    polling thread or a rebalance hook; the queue and the slots' batches are guarded by one
    lock, held once per poll (push) and once per batch (hand back and take the next).
    """

    def __init__(
        self,
        weights: Mapping[int, int],
        shards: int,
        ordering: Ordering,
        handler: RecordHandler,
        counters: Counters,
    ) -> None:
        self._queue = LaneQueue(weights, ordering)
        lock = threading.Lock()
        self._ready = threading.Condition(lock)  # a batch may be ready for a waiting worker
        self._released = threading.Condition(lock)  # a worker handed a batch back
        self._shards = shards
        self._slice_s = min(MAX_SLICE_S, SLICE_S * max(1.0, shards / SLICE_SHARDS))
        self._handler = handler
        self._counters = counters
        self._threads: list[threading.Thread] = []
        self._slots = [_Slot() for _ in range(shards)]
        self._idle = 0  # workers waiting for a batch
        self._waiting = 0  # wait_idle() and wait_progress() callers
        #: Batches handed back so far (see :meth:`wait_progress`).
        self.handed_back = 0
        self._halted = False
        self._closed = False
        #: The first record that was not done; dispatch halted with it.
        self.failure: Failure | None = None

    @property
    def halted(self) -> bool:
        """Whether a record was not done: nothing is dispatched any more."""
        return self._halted

    def start(self) -> None:
        """Start the worker threads."""
        for index, slot in enumerate(self._slots):
            thread = threading.Thread(
                target=self._worker, args=(slot,), name=f"priority-kafka-worker-{index}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def push(self, items: Iterable[Item]) -> None:
        """Queue ``(level, partition, completion, records)`` items, in order (nothing once
        halted), and wake as many idle workers as there are batches."""
        with self._ready:
            if self._halted:
                return
            batches = 0
            for level, tp, group, records in items:
                self._queue.push(level, tp, group, records)
                batches += -(-len(records) // self._limit(level))
            if self._idle and batches:
                self._ready.notify(min(self._idle, batches))

    def _limit(self, level: int) -> int:
        """Records in a batch of ``level``: about a slice of its handler time."""
        estimate = self._queue.shares.estimate(level)
        slice_s = self._slice_s
        return MAX_BATCH if estimate * MAX_BATCH <= slice_s else max(1, int(slice_s / estimate))

    def discard(self, partitions: Collection[TopicPartition] | None = None) -> int:
        """Drop queued records of ``partitions`` (None: all); return how many. A worker holding
        some stops before the next one."""
        with self._ready:
            return self._queue.discard(partitions)

    def running(self, partitions: Collection[TopicPartition] | None = None) -> bool:
        """Whether a worker holds a record of ``partitions`` (None: any) now."""
        with self._ready:
            return self._holding(partitions)

    def _holding(self, partitions: Collection[TopicPartition] | None) -> bool:
        for slot in self._slots:
            batch = slot.batch
            if batch is not None and (
                partitions is None or any(run[0].source in partitions for run in batch.runs)
            ):
                return True
        return False

    def running_longer_than(self, seconds: float) -> list[Running]:
        """The records running for more than ``seconds``, with how long they have run."""
        now = time.monotonic()
        found = []
        for slot in self._slots:
            started, record = slot.started, slot.record
            if record is not None and now - started > seconds:
                found.append(Running(slot.tp, record.offset, slot.epoch, now - started))
        return found

    def wait_idle(self, partitions: Collection[TopicPartition] | None, budget_s: float) -> bool:
        """Wait up to ``budget_s`` until no worker holds a record of ``partitions`` (None: any);
        discard their queued records first. Returns whether it came to that. The records that
        finished are marked in the ledger by then."""
        deadline = time.monotonic() + budget_s
        with self._released:
            self._waiting += 1
            try:
                while self._holding(partitions):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._released.wait(remaining)
            finally:
                self._waiting -= 1
        return True

    def drain_s(self) -> float:
        """About how long the workers need for the records queued now, at the pace of the
        fastest level (so rather less): how long the polling thread may wait without leaving
        them idle."""
        with self._ready:
            return self._queue.queued * self._queue.shares.fastest() / self._shards

    def wait_progress(self, seen: int, budget_s: float) -> None:
        """Wait up to ``budget_s`` until a batch is handed back after :attr:`handed_back` was
        ``seen`` (its records are marked done by then, so a paused partition may resume); return
        at once if one was, or if no worker holds a batch and nothing is queued."""
        with self._released:
            if self.handed_back != seen or not (self._queue.queued or self._holding(None)):
                return
            self._waiting += 1
            try:
                self._released.wait(budget_s)
            finally:
                self._waiting -= 1

    def reclaim(self, seconds: float = SLICE_S) -> int:
        """When a worker has been in one record for more than ``seconds``, mark the records it
        finished before it and give the records it has not started back to their lanes (a slow
        or stuck handler must hold back neither the commit of what is done nor the other lanes
        of its batch); wake idle workers for them. Returns how many were given back."""
        now = time.monotonic()
        reclaimed = 0
        with self._ready:
            for slot in self._slots:
                batch = slot.batch
                if batch is None or slot.record is None or now - slot.started <= seconds:
                    continue
                pending = slot.pending
                if pending is not None and pending[1]:
                    # Marking is idempotent, so racing the worker's own marks is harmless.
                    pending[0].complete(list(pending[1]))
                if batch.records:
                    reclaimed += self._queue.steal(batch)
            if reclaimed and self._idle:
                self._ready.notify(min(self._idle, reclaimed))
        return reclaimed

    def sizes(self) -> tuple[int, int]:
        """Records waiting (queued, or in a batch and not started), and running now."""
        with self._ready:
            waiting = sum(len(slot.batch.records) for slot in self._slots if slot.batch)
            running = sum(slot.record is not None for slot in self._slots)
            return self._queue.queued + waiting, running

    def close(self, join_s: float = 0.5) -> None:
        """Stop the workers once their current batch ends (a stuck one keeps its daemon)."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(timeout=join_s)

    def _worker(self, slot: _Slot) -> None:
        queue = self._queue
        batch: Batch | None = None
        failure: Failure | None = None
        seconds = 0.0
        while True:
            # Handing a batch back and taking the next is one hold of the lock: with handlers of
            # a millisecond, the lock's hand-offs between 64 workers were most of their cost.
            with self._ready:
                if batch is not None:
                    self._hand_back(slot, batch, seconds, failure)
                while self._halted or (batch := queue.take(self._limit)) is None:
                    if self._closed:
                        return
                    self._idle += 1
                    self._ready.wait()
                    self._idle -= 1
                slot.batch = batch
                if self._idle and queue.has_ready():
                    self._ready.notify()  # more than this batch is ready: a peer helps
            started = time.monotonic()
            failure = self._run(slot, batch, started)
            seconds = time.monotonic() - started

    def _hand_back(
        self, slot: _Slot, batch: Batch, seconds: float, failure: Failure | None
    ) -> None:
        """Give ``batch`` back after its run (the lock held): its lanes may run again."""
        self._queue.finish(batch, seconds)
        slot.batch = None
        self.handed_back += 1
        if failure is not None and not self._halted:
            # Nothing queued may overtake a record that is not done (the next record of its
            # lane least of all): halt dispatch; the executor stops and the rest comes again.
            self._halted = True
            self.failure = failure
            self._queue.discard()
        if self._waiting:
            self._released.notify_all()

    def _run(self, slot: _Slot, batch: Batch, started: float) -> Failure | None:
        """Run ``batch`` until done, a record not done, past the slice, or stolen; mark what is
        done. The records it does not take stay in ``batch.records`` for :meth:`LaneQueue.finish`.
        Returns the failure, if any."""
        call, clock, pop = self._handler.call, time.monotonic, batch.records.popleft
        deadline = started + self._slice_s
        now = started
        failure: Failure | None = None
        counted: dict[str, int] = {}  # outcomes of records that took the slow path
        done_count = slow_done = 0
        stop = False
        # Runs of one partition's epoch follow each other (a key lane often holds one record
        # of a poll): their offsets are marked done together, once the epoch changes (or by
        # reclaim(), if a record holds the worker up meanwhile).
        group: Any = None
        done: list[int] = []
        tp: Any = None
        for lane, lane_group, count in batch.runs:
            if lane_group is not group:
                done_count += self._mark(group, done)
                group, done, tp = cast(Completion, lane_group), [], lane.source
                slot.tp, slot.epoch, slot.pending = tp, group.epoch, (group, done)
            for _ in range(count):
                try:
                    record = pop()
                except IndexError:  # stolen while this worker was stuck in a record
                    stop = True
                    break
                if lane.group is not group:
                    continue  # discarded (revoked, or a halt): not run
                slot.started = now
                slot.record = record
                try:
                    if type(record) is Undeserializable:
                        raise record.error
                    call(record)
                except Exception as error:
                    result = self._handler.process(
                        record, (tp.topic, tp.partition, record.offset), error
                    )
                    outcome = result.outcome
                    counted[outcome.value] = counted.get(outcome.value, 0) + 1
                    if not outcome.done:
                        failure = Failure(tp, record, result)
                        stop = True
                        break
                    slow_done += 1
                done.append(record.offset)
                now = clock()
                if now > deadline:
                    stop = True
                    break
            if stop:
                break
        slot.record = None
        done_count += self._mark(group, done)
        slot.pending = None
        counted["handled"] = counted.get("handled", 0) + done_count - slow_done
        for outcome_name, n in counted.items():
            if n:
                self._counters.add(outcome_name, n)
        return failure

    def _mark(self, group: Completion | None, done: list[int]) -> int:
        """Mark ``done`` offsets in their ``group``; return how many."""
        if not done:
            return 0
        assert group is not None
        if group.forgotten:
            # Revoked while running: the new owner handles these again. A revoke between
            # this check and the marks below goes uncounted (the marks have no effect).
            self._counters.add("stale_completions", len(done))
        group.complete(done)
        return len(done)
