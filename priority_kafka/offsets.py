"""Per-partition commit tracking: which offset is safe to commit while work finishes out of order.

Records are handed out in offset order per partition (offsets increase, gaps allowed: compaction
and transaction markers leave holes) and complete in any order. The committable offset of a
partition is the Kafka commit offset, i.e. the next offset to consume: the lowest offset received
but not yet done, or the last received offset + 1 once everything received is done. It never
passes a record that is not done, so a crash after a commit loses nothing.

Each assignment of a partition is an *epoch*: :meth:`OffsetTracker.forget` (on revoke) starts a
new one, and a completion reported with an older epoch is ignored, so work finishing after its
partition was revoked cannot move the new owner's watermark.

Pure: no Kafka, threads or clocks; the caller serialises access.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from priority_kafka._checks import check_int
from priority_kafka.errors import IllegalStateError

__all__ = ["OffsetTracker"]

P = TypeVar("P", bound=Hashable)


class _Partition:
    """Offsets of one partition in one epoch: received ones in order, and the unfinished ones."""

    __slots__ = ("committed", "epoch", "last_received", "pending", "unfinished")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        # Received offsets not yet passed by the watermark, oldest first; done ones leave it
        # lazily, when the watermark reaches them.
        self.pending: deque[int] = deque()
        # Received offsets not done yet.
        self.unfinished: set[int] = set()
        self.last_received: int | None = None
        self.committed: int | None = None

    def watermark(self) -> int | None:
        """The commit offset: lowest unfinished received offset, else last received + 1."""
        pending, unfinished = self.pending, self.unfinished
        while pending and pending[0] not in unfinished:
            pending.popleft()
        if pending:
            return pending[0]
        return None if self.last_received is None else self.last_received + 1


class OffsetTracker(Generic[P]):
    """Tracks received and completed offsets per partition and says what may be committed.

    Guarantees: :meth:`committable` never returns an offset above a received record that is not
    completed; once every received record of a partition is completed it returns the last
    received offset + 1. Completions of unknown partitions, of an earlier epoch, or of offsets
    not received are ignored (reported by the return value), never raised, because they are the
    normal aftermath of a rebalance.
    """

    __slots__ = ("_epochs", "_partitions")

    def __init__(self) -> None:
        self._partitions: dict[P, _Partition] = {}
        # Survives forget(), so a re-assigned partition gets a fresh epoch.
        self._epochs: dict[P, int] = {}

    def __repr__(self) -> str:
        return f"OffsetTracker(partitions={len(self._partitions)}, in_flight={self.in_flight()})"

    def received(self, partition: P, offset: int) -> int:
        """Record that ``offset`` of ``partition`` was handed out; return its epoch.

        Raises IllegalStateError if the offset does not increase within the epoch (a seek
        backwards while tracking; forget the partition first).
        """
        epoch = self.try_receive(partition, offset)
        if epoch is None:
            raise IllegalStateError(
                f"offsets of {partition!r} must increase: got {offset} after "
                f"{self._partitions[partition].last_received}."
            )
        return epoch

    def try_receive(self, partition: P, offset: int) -> int | None:
        """As :meth:`received`, but a redelivery (an offset that does not increase within the
        epoch: the position moved back while the partition is tracked) returns None and
        changes nothing. The record is still tracked, so skipping it loses nothing."""
        offset = check_int("offset", offset, minimum=0)
        state = self._partitions.get(partition)
        if state is None:
            epoch = self._epochs.get(partition, 0) + 1
            self._epochs[partition] = epoch
            state = self._partitions[partition] = _Partition(epoch)
        elif state.last_received is not None and offset <= state.last_received:
            return None
        state.pending.append(offset)
        state.unfinished.add(offset)
        state.last_received = offset
        return state.epoch

    def completed(self, partition: P, offset: int, epoch: int) -> bool:
        """Mark ``offset`` done; False (and no effect) if it is stale or was never received."""
        state = self._partitions.get(partition)
        if state is None or state.epoch != epoch or offset not in state.unfinished:
            return False
        state.unfinished.discard(offset)
        if offset == state.pending[0]:
            state.watermark()  # trims now, so memory follows in-flight work, not commit cadence
        return True

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
        """Records received from the watermark on (done or not): what a crash would replay
        if the watermark were committed now. One stuck record keeps this growing while later
        ones complete, which ``in_flight`` does not show."""
        state = self._partitions.get(partition)
        if state is None:
            return 0
        state.watermark()  # trims the done prefix
        return len(state.pending)

    def in_flight(self, partition: P | None = None) -> int:
        """Records received and not done, for one partition or (None) for all of them."""
        if partition is None:
            return sum(len(s.unfinished) for s in self._partitions.values())
        state = self._partitions.get(partition)
        return 0 if state is None else len(state.unfinished)

    def epoch(self, partition: P) -> int | None:
        """The current epoch of ``partition``, or None if it is not tracked."""
        state = self._partitions.get(partition)
        return None if state is None else state.epoch

    def forget(self, partition: P) -> None:
        """Stop tracking ``partition`` (revoked); later completions of this epoch are ignored."""
        self._partitions.pop(partition, None)

    def partitions(self) -> Iterator[P]:
        """The partitions currently tracked."""
        return iter(list(self._partitions))
