"""What ``poll()`` has returned, per partition: the offsets a commit without offsets commits (pure).

A level's client consumer fetches ahead of what PriorityConsumer returns, so its own position
(and kafka-python's auto-commit) would commit records nobody has seen. Commits use this ledger
instead: per partition, the offset after the last record returned, or the offset sought to.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable
from typing import Generic, NamedTuple, TypeVar

import attrs

__all__ = ["AutoCommitTimer", "Delivered", "DeliveredOffsets"]

P = TypeVar("P", bound=Hashable)


class Delivered(NamedTuple):
    """The commit offset of a partition (the next record to return) and its leader epoch."""

    offset: int
    leader_epoch: int


class DeliveredOffsets(Generic[P]):
    """Per partition, the offset after the last record returned (or sought to).

    Guarantees: an offset is only ever the one after a record that was returned, or one the
    caller sought to; forgotten partitions (revoked, unassigned) are not committed.
    """

    __slots__ = ("_offsets",)

    def __init__(self) -> None:
        self._offsets: dict[P, Delivered] = {}

    def __repr__(self) -> str:
        return f"DeliveredOffsets({len(self._offsets)} partitions)"

    def mark(self, partition: P, offset: int, leader_epoch: int = -1) -> None:
        """The record at ``offset`` was returned: commit ``offset + 1`` for ``partition``."""
        self._offsets[partition] = Delivered(offset + 1, leader_epoch)

    def sought(self, partition: P, offset: int) -> None:
        """``partition`` was sought to ``offset``: a commit now commits that offset."""
        self._offsets[partition] = Delivered(offset, -1)

    def forget(self, partitions: Iterable[P]) -> None:
        """Partitions left or moved without a known offset: commit nothing for them."""
        for partition in partitions:
            self._offsets.pop(partition, None)

    def keep(self, partitions: Collection[P]) -> None:
        """Forget every partition not in ``partitions``."""
        self._offsets = {p: o for p, o in self._offsets.items() if p in partitions}

    def clear(self) -> None:
        """Forget everything (unsubscribed)."""
        self._offsets.clear()

    def of(self, partitions: Collection[P]) -> dict[P, Delivered]:
        """The delivered offsets of those of ``partitions`` that have one."""
        return {p: o for p, o in self._offsets.items() if p in partitions}


@attrs.define
class AutoCommitTimer:
    """When auto-commit is next due (``interval_s`` apart; time passed in)."""

    interval_s: float
    next_at: float = 0.0

    def due(self, now: float) -> bool:
        """Whether a commit is due at ``now``."""
        return now >= self.next_at

    def reset(self, now: float) -> None:
        """A commit was made at ``now``."""
        self.next_at = now + self.interval_s
