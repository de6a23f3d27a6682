"""What each partition's commit carries: the watermark, and the completed offsets above it.

The executor commits a partition's watermark (the lowest offset not done); with the offset map
on, the commit's metadata also carries the offsets completed above it
(:mod:`priority_kafka.offset_map`), so the next owner of the partition, or this process after a
restart, skips them. :class:`CommitPlanner` keeps, per partition:

* the map *inherited* from the commit found when the partition was taken on (the previous
  owner's, or this process's before a restart): its offsets are done, so records received at
  them are skipped (:meth:`CommitPlanner.split`), and those not received yet are carried on in
  every commit, so a second crash does not forget them;
* the last plan committed, so a commit is made only when the watermark or the map changed, and
  the map is encoded once per change.

A plan *covers* an offset when the offset is below its watermark or among the offsets its
metadata carries: exactly the records a reader of that commit will not handle again. Under
exactly-once, a record's output is committed only in the transaction of a plan that covers it.

Pure: no Kafka, threads or clocks; the caller serialises access.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

import attrs

from priority_kafka.offset_map import OffsetMap, encode_offset_ranges
from priority_kafka.offsets import PartitionOffsets

__all__ = ["CommitPlan", "CommitPlanner"]

P = TypeVar("P", bound=Hashable)
Ranges = tuple[tuple[int, int], ...]


@attrs.frozen
class CommitPlan:
    """One partition's commit: ``offset`` (the watermark) and its ``metadata``.

    ``carried``: the completed offsets above ``offset`` the metadata carries (sorted half-open
    ranges); ``left_out``: completed offsets that did not fit ``max_bytes`` (replayed after a
    crash, as without a map).
    """

    offset: int
    metadata: str = ""
    carried: Ranges = ()
    left_out: int = 0

    def covers(self, offset: int) -> bool:
        """Whether a reader of this commit skips ``offset`` (below the watermark, or carried)."""
        if offset < self.offset:
            return True
        index = bisect_right(self.carried, (offset, _BEYOND)) - 1
        return index >= 0 and self.carried[index][0] <= offset < self.carried[index][1]


_BEYOND = 2**63


def _union(first: Ranges, second: Ranges) -> list[tuple[int, int]]:
    """Sorted disjoint half-open ranges covering both inputs (each sorted and disjoint)."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(r for r in (*first, *second) if r[0] < r[1]):
        if merged and low <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
        else:
            merged.append((low, high))
    return merged


class CommitPlanner(Generic[P]):
    """Plans each partition's commit (see the module docstring).

    ``max_bytes``: the most metadata one commit may carry (the broker's
    ``offset.metadata.max.bytes``); None: the offset map is off, commits carry no metadata
    and nothing is inherited.
    """

    __slots__ = ("_committed", "_encoded", "_first", "_inherited", "max_bytes")

    def __init__(self, max_bytes: int | None) -> None:
        self.max_bytes = max_bytes
        self._inherited: dict[P, CommitPlan] = {}
        self._first: set[P] = set()  # inherited, and no record received since
        self._committed: dict[P, CommitPlan] = {}
        # The last plan made per partition, reused while the watermark and map stay the same.
        self._encoded: dict[P, tuple[int, Ranges, CommitPlan]] = {}

    def __repr__(self) -> str:
        return (
            f"CommitPlanner(max_bytes={self.max_bytes}, inherited={len(self._inherited)}, "
            f"committed={len(self._committed)})"
        )

    def inherit(self, partition: P, offset: int, offset_map: OffsetMap | None = None) -> None:
        """``partition`` was taken on with ``offset`` committed (and ``offset_map`` in its
        metadata): what that commit covers is done. Call before its first records arrive."""
        carried = () if offset_map is None else offset_map.ranges
        plan = CommitPlan(offset, "", carried)
        self._committed[partition] = plan
        self._first.add(partition)
        if self.max_bytes is not None:
            self._inherited[partition] = plan

    def inherits(self, partition: P) -> bool:
        """Whether records of ``partition`` may be skipped (see :meth:`split`)."""
        return partition in self._inherited or partition in self._first

    def split(self, partition: P, offsets: Sequence[int]) -> list[int]:
        """Of the received ``offsets`` (increasing), the indexes of those the inherited commit
        covers (done: to skip); forgets it once everything it covers was received.

        A partition whose first record comes from below the commit it was taken on with was
        sought back on purpose (to handle records again): the commit is forgotten, and the
        records are handled and committed again from there."""
        if not offsets:
            return []
        if partition in self._first:
            self._first.discard(partition)
            last = self._committed.get(partition)
            if last is not None and offsets[0] < last.offset:
                self.forget(partition)
                return []
        inherited = self._inherited.get(partition)
        if inherited is None:
            return []
        done = [index for index, offset in enumerate(offsets) if inherited.covers(offset)]
        if offsets[-1] >= _last_covered(inherited):
            del self._inherited[partition]  # received past it: the tracker knows the rest
        return done

    def plan(self, partition: P, state: PartitionOffsets) -> CommitPlan | None:
        """The commit of ``partition`` now, or None when it would not change the last one."""
        mark = state.watermark()
        if mark is None:
            return None
        ranges: Ranges = ()
        if self.max_bytes is not None:
            mark, ranges = self._carried(partition, state, mark)
        cached = self._encoded.get(partition)
        if cached is not None and cached[0] == mark and cached[1] == ranges:
            plan = cached[2]
        elif ranges:
            assert self.max_bytes is not None
            encoded = encode_offset_ranges(mark, ranges, self.max_bytes)
            plan = CommitPlan(mark, encoded.metadata, encoded.ranges,
                              encoded.total - encoded.encoded)
            self._encoded[partition] = (mark, ranges, plan)
        else:
            plan = CommitPlan(mark)
            self._encoded[partition] = (mark, ranges, plan)
        last = self._committed.get(partition)
        if last is not None and (plan.offset < last.offset or (
                plan.offset == last.offset and plan.metadata == last.metadata
                and plan.carried == last.carried)):
            return None
        return plan

    def _carried(self, partition: P, state: PartitionOffsets, mark: int) -> tuple[int, Ranges]:
        """The watermark and the done ranges above it: the tracker's, and what the inherited
        commit covers past the last offset received (a watermark at done offsets moves on)."""
        # Workers mark records done while this reads: one may finish at the watermark between
        # the two scans, so the ranges are cut to above it.
        ranges = tuple(
            (max(start, mark + 1), stop) for start, stop in state.completed_ranges()
            if stop > mark + 1
        )
        inherited = self._inherited.get(partition)
        if inherited is None:
            return mark, ranges
        last = state.last_received
        assert last is not None  # a watermark means something was received
        covered = _union(((0, inherited.offset),), inherited.carried)
        above = tuple((max(start, last + 1), stop) for start, stop in covered if stop > last + 1)
        merged = _union(ranges, above)
        # Offsets at the watermark that the inherited commit covers are done: commit past them,
        # so no commit of ours ever covers less than the one we took the partition on with.
        while merged and merged[0][0] <= mark:
            mark = max(mark, merged.pop(0)[1])
        return mark, tuple(merged)

    def shrink(self) -> int:
        """Halve ``max_bytes`` (the broker refused a map: its limit is lower); the new bound."""
        assert self.max_bytes is not None
        self.max_bytes //= 2
        self._encoded.clear()
        return self.max_bytes

    def committed(self, partition: P, plan: CommitPlan) -> None:
        """``plan`` was committed for ``partition``."""
        last = self._committed.get(partition)
        if last is None or plan.offset >= last.offset:
            self._committed[partition] = plan

    def last(self, partition: P) -> CommitPlan | None:
        """The last plan committed for ``partition`` (or found when it was taken on)."""
        return self._committed.get(partition)

    def forget(self, partition: P) -> None:
        """``partition`` is no longer ours: drop what is kept for it."""
        self._inherited.pop(partition, None)
        self._committed.pop(partition, None)
        self._encoded.pop(partition, None)
        self._first.discard(partition)


def _last_covered(plan: CommitPlan) -> int:
    """The highest offset ``plan`` covers (-1 for none)."""
    return max(plan.offset, plan.carried[-1][1] if plan.carried else 0) - 1
