"""Per-partition bookkeeping of the executor: what was received and done, pauses, commits.

:class:`PartitionLedger` wraps the pure :class:`~priority_kafka.offsets.OffsetTracker` and
:class:`~priority_kafka.commit_plan.CommitPlanner` with the flow-control rule, under one lock,
because the polling thread and the rebalance hooks (kafka-python's IO thread) both use it. It
never calls the consumer: it says what to pause, resume, commit and seek, and the caller does it
on the right thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

from priority_kafka._structs import OffsetAndMetadata, TopicPartition
from priority_kafka._workers import Counters
from priority_kafka.commit_plan import CommitPlan, CommitPlanner
from priority_kafka.executor._bytes import ReceivedBytes
from priority_kafka.offset_map import OffsetMap
from priority_kafka.offsets import OffsetTracker, PartitionOffsets
from priority_kafka.record_size import record_bytes

__all__ = ["FlowChange", "PartitionLedger", "Revoked"]

log = logging.getLogger("priority_kafka.executor")


class FlowChange(NamedTuple):
    """Partitions to pause and to resume now."""

    pause: list[TopicPartition]
    resume: list[TopicPartition]


class Revoked(NamedTuple):
    """What revoking partitions asks of the consumer."""

    commit: dict[TopicPartition, OffsetAndMetadata]
    rewind: dict[TopicPartition, int]  # where each must resume: dropped records come again
    paused: set[TopicPartition]


class PartitionLedger:
    """Received and completed offsets per partition, and the pause state derived from them.

    ``limit`` / ``resume_at``: a partition with ``limit`` records received since its commit
    watermark (done or not: what a crash would replay) is paused until at most ``resume_at``
    are left. Counting from the watermark, not only what is unfinished, bounds the replay when
    one record is stuck while later ones complete. ``max_bytes``: the same in bytes (keys and
    values, see :mod:`~priority_kafka.record_size`), over all partitions: one is paused once
    its bytes reach its share (``max_bytes`` over the partitions tracked) and resumed once at
    most half its share is left (and its records allow). Events (pauses, commits, stale
    completions, redeliveries) are counted in ``counters``.

    ``max_metadata_bytes``: with a number, each commit carries the offsets completed above its
    watermark in its metadata (at most that many bytes), and :meth:`inherit` makes the records
    a partition's last commit covers skipped; None: commits carry no metadata.
    """

    def __init__(
        self, limit: int, resume_at: int, counters: Counters, max_bytes: int | None = None,
        max_metadata_bytes: int | None = None,
    ) -> None:
        self._counters = counters
        self._lock = threading.Lock()
        self._tracker: OffsetTracker[TopicPartition] = OffsetTracker()
        self._planner: CommitPlanner[TopicPartition] = CommitPlanner(max_metadata_bytes)
        # The plan behind each offset committable() last returned, confirmed by committed().
        self._planned: dict[TopicPartition, CommitPlan] = {}
        # The first offset received in each partition's epoch (where it was taken on).
        self._starts: dict[TopicPartition, int] = {}
        self._bytes: ReceivedBytes[TopicPartition] = ReceivedBytes()
        self._paused: set[TopicPartition] = set()
        self._limit = limit
        self._resume_at = resume_at
        self._max_bytes = max_bytes

    @property
    def carries_maps(self) -> bool:
        """Whether commits carry offset maps (and partitions inherit them)."""
        return self._planner.max_bytes is not None

    def untracked(self, partitions: Collection[TopicPartition]) -> list[TopicPartition]:
        """Those of ``partitions`` not tracked: their next records start a new epoch."""
        with self._lock:
            return [tp for tp in partitions if self._tracker.state(tp) is None]

    def inherit(
        self, partition: TopicPartition, offset: int, offset_map: OffsetMap | None
    ) -> None:
        """``partition`` (untracked) was last committed at ``offset`` with ``offset_map``: the
        records that commit covers are skipped as done when they arrive."""
        with self._lock:
            self._planner.inherit(partition, offset, offset_map)

    def restart_points(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Where each tracked one of ``partitions`` must be consumed from again so that all
        since its last commit (made or inherited; else since it was taken on) comes again."""
        with self._lock:
            points = {}
            for tp in partitions:
                last = self._planner.last(tp)
                point = last.offset if last is not None else self._starts.get(tp)
                if point is not None:
                    points[tp] = point
            return points

    def last_committed(self, partition: TopicPartition) -> CommitPlan | None:
        """The last commit of ``partition`` known to this ledger (made, or inherited)."""
        with self._lock:
            return self._planner.last(partition)

    def __repr__(self) -> str:
        with self._lock:
            return f"PartitionLedger({self._tracker!r}, paused={len(self._paused)})"

    def receive(
        self, batch: Mapping[TopicPartition, list[Any]]
    ) -> list[tuple[TopicPartition, PartitionOffsets, list[Any]]]:
        """Track a poll's records; return each partition's epoch with its new records (in
        offset order; ``complete`` them on the epoch). Redeliveries of records still tracked
        are skipped."""
        received = []
        skipped = 0
        with self._lock:
            for tp, records in batch.items():
                if not records:
                    continue
                first, last = records[0].offset, records[-1].offset
                offsets: Sequence[int] = (
                    range(first, last + 1) if last - first + 1 == len(records)
                    else [record.offset for record in records]
                )
                if tp not in self._starts:
                    self._starts[tp] = first
                state, repeated = self._tracker.receive(tp, offsets)
                if repeated:
                    skipped += repeated
                    records = records[repeated:]
                if records and self._planner.inherits(tp):
                    records = self._skip_done(tp, state, records)
                if records:
                    received.append((tp, state, records))
                    if self._max_bytes is not None:
                        self._bytes.receive(tp, records[-1].offset, record_bytes(records))
        if skipped:
            self._counters.add("skipped_redeliveries", skipped)
        return received

    def _skip_done(
        self, tp: TopicPartition, state: PartitionOffsets, records: list[Any]
    ) -> list[Any]:
        """Mark done, and leave out, the records the partition's inherited commit covers."""
        done = self._planner.split(tp, [record.offset for record in records])
        if not done:
            return records
        state.complete(records[index].offset for index in done)
        self._counters.add("skipped_completed", len(done))
        if len(done) == len(records):
            return []
        skip = set(done)
        return [record for index, record in enumerate(records) if index not in skip]

    def flow(self) -> FlowChange:
        """Which partitions to pause or resume now; the ledger assumes the caller does it."""
        with self._lock:
            change = FlowChange([], [])
            partitions = list(self._tracker.partitions())
            share = (
                self._max_bytes // len(partitions) if self._max_bytes is not None and partitions
                else None
            )
            for tp in partitions:
                pending = self._tracker.uncommitted(tp)
                size = 0 if share is None else self._bytes.release(
                    tp, self._tracker.watermark(tp)
                )
                if tp not in self._paused:
                    if pending >= self._limit or (share is not None and size >= share):
                        change.pause.append(tp)
                elif pending <= self._resume_at and (share is None or size <= share // 2):
                    change.resume.append(tp)
            self._paused.update(change.pause)
            self._paused.difference_update(change.resume)
        if change.pause:
            self._counters.add("pauses", len(change.pause))
        return change

    def committable(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Offsets to commit for ``partitions`` (None: every tracked one) that would advance."""
        with self._lock:
            return self._committable(
                self._tracker.partitions() if partitions is None else partitions
            )

    def _committable(
        self, partitions: Collection[TopicPartition] | Any
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        offsets = {}
        for tp in partitions:
            state = self._tracker.state(tp)
            plan = None if state is None else self._planner.plan(tp, state)
            if plan is not None:
                offsets[tp] = OffsetAndMetadata(plan.offset, plan.metadata, -1)
                self._planned[tp] = plan
        return offsets

    def plans(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[
        TopicPartition, CommitPlan
    ]:
        """The plans behind ``offsets`` (from :meth:`committable`)."""
        with self._lock:
            return {tp: self._planned[tp] for tp in offsets if tp in self._planned}

    def committed(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """These offsets were committed: :meth:`committable` reports only progress after them."""
        sizes = []
        truncated = 0
        with self._lock:
            for tp, meta in offsets.items():
                self._tracker.mark_committed(tp, meta.offset)
                plan = self._planned.get(tp)
                if (plan is None or plan.offset != meta.offset
                        or self._tracker.state(tp) is None):
                    continue
                self._planner.committed(tp, plan)
                if plan.metadata:
                    sizes.append(len(plan.metadata))
                    truncated += plan.left_out > 0
        self._counters.add("commits")
        if sizes:
            self._counters.add("offset_maps", len(sizes))
            self._counters.add("offset_map_bytes", sum(sizes))
            self._counters.at_least("largest_offset_map", max(sizes))
        if truncated:
            self._counters.add("truncated_offset_maps", truncated)

    def commit_failed(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], error: BaseException
    ) -> None:
        """A commit failed (a rebalance raced it): the next one catches up."""
        self._counters.add("commit_failures")
        log.warning("commit of %s failed: %r", {tp: m.offset for tp, m in offsets.items()}, error)

    def metadata_refused(self, error: BaseException) -> bool:
        """The broker refused a commit's metadata as too long: halve the maps' bound. Returns
        whether the bound changed (a commit may be tried again at once)."""
        with self._lock:
            previous = self._planner.max_bytes or 0
            bound = self._planner.shrink() if previous else 0
        self._counters.add("commit_failures")
        log.warning(
            "the broker refused commit metadata as too long (%r): offset maps are now cut to "
            "%d bytes; set offset_metadata_max_bytes to the broker's offset.metadata.max.bytes",
            error, bound,
        )
        return previous > 0

    def tracked(self, partitions: Collection[TopicPartition]) -> set[TopicPartition]:
        """Those of ``partitions`` the ledger tracks."""
        with self._lock:
            return {tp for tp in self._tracker.partitions() if tp in partitions}

    def revoke(self, partitions: Collection[TopicPartition]) -> Revoked:
        """Forget ``partitions`` and say what to commit, where to seek back to, what to resume.

        One step under the lock, so a completion arriving meanwhile either counts or is stale.
        """
        with self._lock:
            revoked = Revoked(self._committable(partitions), {}, set(partitions) & self._paused)
            for tp in partitions:
                mark = self._tracker.watermark(tp)
                if mark is not None:
                    revoked.rewind[tp] = mark
            self._forget(partitions)
            return revoked

    def forget(self, partitions: Collection[TopicPartition]) -> None:
        """Stop tracking ``partitions`` (lost, or the consumer is closing): commit nothing."""
        with self._lock:
            self._forget(partitions)

    def _forget(self, partitions: Collection[TopicPartition]) -> None:
        for tp in partitions:
            self._tracker.forget(tp)
            self._planner.forget(tp)
            self._planned.pop(tp, None)
            self._starts.pop(tp, None)
            self._bytes.forget(tp)
            self._paused.discard(tp)

    def completed_ranges(self, tp: TopicPartition) -> list[tuple[int, int]]:
        """The done offsets of ``tp`` above its watermark, as sorted half-open ``(start, stop)``
        ranges (what a commit's metadata would need so a restart skips them)."""
        with self._lock:
            return self._tracker.completed_ranges(tp)

    def gauges(self) -> tuple[int, int]:
        """Records in flight and partitions paused now."""
        with self._lock:
            return self._tracker.in_flight(), len(self._paused)

    def held_bytes(self) -> int:
        """Bytes of the records received since their partitions' watermarks, as of the last
        :meth:`flow` (0 without ``max_bytes``)."""
        with self._lock:
            return self._bytes.total()
