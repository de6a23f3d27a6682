"""Per-partition commit tracking: which offset is safe to commit while work finishes out of order.

Records are handed out in offset order per partition (offsets increase, gaps allowed: compaction
and transaction markers leave holes) and complete in any order. The committable offset of a
partition is the Kafka commit offset, i.e. the next offset to consume: the lowest offset received
but not yet done, or the last received offset + 1 once everything received is done. It never
passes a record that is not done, so a crash after a commit loses nothing.

Each assignment of a partition is an *epoch*, one :class:`PartitionOffsets`: :meth:`OffsetTracker.
forget` (on revoke) drops it and the next :meth:`~OffsetTracker.receive` starts a new one, so work
finishing after its partition was revoked marks the old object and cannot move the new owner's
watermark.

The state is kept for runs of offsets, not per record: one flag byte per offset in blocks of
4,096 offsets (``1``: done, or no record there; ``0``: received and not done), so receiving a
contiguous poll is a slice assignment, and the watermark, the in-flight count and the completed
ranges are ``bytearray.find``/``count`` scans in C. Blocks below the watermark are dropped.

Pure: no Kafka, threads or clocks; the caller serialises access, except
:meth:`PartitionOffsets.complete`, which is made for worker threads (see there).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from priority_kafka._checks import check_int

__all__ = ["OffsetTracker", "PartitionOffsets"]

P = TypeVar("P", bound=Hashable)

_BITS = 12
_SIZE = 1 << _BITS
_MASK = _SIZE - 1
_DONE = b"\x01" * _SIZE


class PartitionOffsets:
    """Received and done offsets of one partition in one epoch.

    Thread use: :meth:`complete` may run on any thread while the owner (one thread at a time)
    calls the rest. It only stores ``1`` flags of records received and not done, which are never
    in a dropped block (a block is dropped once it has no ``0`` flag), and each store is one
    atomic ``bytearray`` item assignment; the owner reading a flag just before it is set sees the
    record not done, which only keeps the watermark lower for a moment.
    """

    __slots__ = (
        "_blocks", "_cursor", "_done", "_received", "_tracked", "committed", "epoch",
        "forgotten", "last_received",
    )

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        #: Set once the tracker dropped this epoch: completions no longer count.
        self.forgotten = False
        self.last_received: int | None = None
        self.committed: int | None = None
        # Block number -> one flag per offset (1: done or not a record, 0: received, not done).
        self._done: dict[int, bytearray] = {}
        # Block number -> 1 where a record was received (counts what a crash would replay).
        self._received: dict[int, bytearray] = {}
        # Block numbers held, ascending; the first holds the watermark at ``_cursor``.
        self._blocks: deque[int] = deque()
        self._cursor = 0
        # Records received in the blocks held.
        self._tracked = 0

    def __repr__(self) -> str:
        return (
            f"PartitionOffsets(epoch={self.epoch}, watermark={self.watermark()}, "
            f"in_flight={self.in_flight()})"
        )

    def receive(self, offsets: Sequence[int]) -> int:
        """Track ``offsets`` (increasing; a ``range`` for a contiguous run); return how many
        leading ones were skipped as redeliveries (not above the last one received)."""
        if not offsets:
            return 0
        last = self.last_received
        skipped = 0
        if last is not None and offsets[0] <= last:
            skipped = bisect_right(offsets, last)
            offsets = offsets[skipped:]
            if not offsets:
                return skipped
        if isinstance(offsets, range) and offsets.step == 1:
            self._receive_run(offsets.start, offsets.stop)
        else:
            for offset in offsets:
                self._receive_run(offset, offset + 1)
        self.last_received = offsets[-1]
        self._tracked += len(offsets)
        return skipped

    def _receive_run(self, start: int, stop: int) -> None:
        while start < stop:
            number = start >> _BITS
            done = self._done.get(number)
            if done is None:
                done = self._done[number] = bytearray(_DONE)
                self._received[number] = bytearray(_SIZE)
                self._blocks.append(number)
            begin = start & _MASK
            end = min(stop - (number << _BITS), _SIZE)
            done[begin:end] = bytes(end - begin)
            self._received[number][begin:end] = _DONE[begin:end]
            start = (number + 1) << _BITS

    def complete(self, offsets: Iterable[int]) -> None:
        """Mark received ``offsets`` done (any thread; see the class)."""
        blocks = self._done
        for offset in offsets:
            done = blocks.get(offset >> _BITS)
            if done is not None:
                done[offset & _MASK] = 1

    def watermark(self) -> int | None:
        """The commit offset: the lowest received offset not done, else last received + 1
        (None before anything was received). Drops the blocks below it."""
        blocks = self._blocks
        while blocks:
            number = blocks[0]
            index = self._done[number].find(0, self._cursor)
            if index >= 0:
                self._cursor = index
                return (number << _BITS) + index
            blocks.popleft()
            del self._done[number]
            self._tracked -= self._received.pop(number).count(1)
            self._cursor = 0
        return None if self.last_received is None else self.last_received + 1

    def uncommitted(self) -> int:
        """Records received from the watermark on (done or not): what a crash would replay if
        the watermark were committed now. One stuck record keeps this growing while later ones
        complete, which :meth:`in_flight` does not show."""
        self.watermark()
        if not self._blocks:
            return 0
        return self._tracked - self._received[self._blocks[0]].count(1, 0, self._cursor)

    def in_flight(self) -> int:
        """Records received and not done."""
        return sum(done.count(0) for done in self._done.values())

    def completed_ranges(self) -> list[tuple[int, int]]:
        """The done offsets above the watermark, as sorted half-open ranges ``(start, stop)``
        (offsets in them that are not records, such as compaction gaps, count as done)."""
        mark = self.watermark()
        if mark is None or self.last_received is None:
            return []
        end = self.last_received + 1
        ranges: list[tuple[int, int]] = []
        position = self._cursor
        for number in self._blocks:
            done, base = self._done[number], number << _BITS
            while position < _SIZE and base + position < end:
                start = done.find(1, position)
                if start < 0 or base + start >= end:
                    break
                stop = done.find(0, start)
                stop = _SIZE if stop < 0 else stop
                low, high = base + start, min(base + stop, end)
                if ranges and ranges[-1][1] == low:
                    low = ranges.pop()[0]
                ranges.append((low, high))
                position = stop
            position = 0
        return ranges


class OffsetTracker(Generic[P]):
    """Tracks received and completed offsets per partition and says what may be committed.

    Guarantees: :meth:`committable` never returns an offset above a received record that is not
    completed; once every received record of a partition is completed it returns the last
    received offset + 1. Completions marked on a forgotten epoch (:class:`PartitionOffsets`) and
    redeliveries are ignored, never raised, because they are the normal aftermath of a rebalance.
    """

    __slots__ = ("_epochs", "_partitions")

    def __init__(self) -> None:
        self._partitions: dict[P, PartitionOffsets] = {}
        # Survives forget(), so a re-assigned partition gets a fresh epoch.
        self._epochs: dict[P, int] = {}

    def __repr__(self) -> str:
        return f"OffsetTracker(partitions={len(self._partitions)}, in_flight={self.in_flight()})"

    def receive(self, partition: P, offsets: Sequence[int]) -> tuple[PartitionOffsets, int]:
        """Track ``offsets`` of ``partition`` (increasing; a ``range`` for a contiguous run);
        return its current epoch, which completes them, and how many leading offsets were
        skipped as redeliveries (the position moved back while the partition is tracked: those
        records are still tracked, so skipping them loses nothing)."""
        if offsets:
            check_int("offset", offsets[0], minimum=0)
        state = self._partitions.get(partition)
        if state is None:
            epoch = self._epochs.get(partition, 0) + 1
            self._epochs[partition] = epoch
            state = self._partitions[partition] = PartitionOffsets(epoch)
        return state, state.receive(offsets)

    def state(self, partition: P) -> PartitionOffsets | None:
        """The current epoch of ``partition``, or None if it is not tracked."""
        return self._partitions.get(partition)

    def watermark(self, partition: P) -> int | None:
        """Where consumption of ``partition`` must resume so nothing unfinished is skipped:
        the lowest unfinished received offset, else last received + 1 (None if untracked)."""
        state = self._partitions.get(partition)
        return None if state is None else state.watermark()

    def committable(self, partition: P) -> int | None:
        """The offset to commit for ``partition``, or None if it would not advance the last one."""
        state = self._partitions.get(partition)
        if state is None:
            return None
        mark = state.watermark()
        if mark is None or (state.committed is not None and mark <= state.committed):
            return None
        return mark

    def mark_committed(self, partition: P, offset: int) -> None:
        """Remember that ``offset`` was committed, so :meth:`committable` reports only progress."""
        state = self._partitions.get(partition)
        if state is not None and (state.committed is None or offset > state.committed):
            state.committed = offset

    def uncommitted(self, partition: P) -> int:
        """Records received from the watermark on (see :meth:`PartitionOffsets.uncommitted`)."""
        state = self._partitions.get(partition)
        return 0 if state is None else state.uncommitted()

    def in_flight(self, partition: P | None = None) -> int:
        """Records received and not done, for one partition or (None) for all of them."""
        if partition is None:
            return sum(state.in_flight() for state in self._partitions.values())
        state = self._partitions.get(partition)
        return 0 if state is None else state.in_flight()

    def completed_ranges(self, partition: P) -> list[tuple[int, int]]:
        """The done offsets of ``partition`` above its watermark, as sorted half-open ranges
        (see :meth:`PartitionOffsets.completed_ranges`); empty if untracked."""
        state = self._partitions.get(partition)
        return [] if state is None else state.completed_ranges()

    def forget(self, partition: P) -> None:
        """Stop tracking ``partition`` (revoked); later completions of this epoch are ignored."""
        state = self._partitions.pop(partition, None)
        if state is not None:
            state.forgotten = True

    def partitions(self) -> Iterator[P]:
        """The partitions currently tracked."""
        return iter(list(self._partitions))
