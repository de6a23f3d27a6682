"""A PriorityConsumer's commits: what ``poll()`` returned, split by level, sync, async and auto.

Each level's client commits its own partitions in its own group. Without explicit offsets a
commit covers, per assigned partition, the offset after the last record returned (the
:class:`~priority_kafka.kafka_python.consumer._delivered.DeliveredOffsets` ledger), never a
prefetched one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from priority_kafka.kafka_python._kafka import Future, OffsetAndMetadata, TopicPartition, all_of
from priority_kafka.kafka_python.consumer._delivered import AutoCommitTimer, DeliveredOffsets
from priority_kafka.kafka_python.consumer._level import Level, commit_offsets

__all__ = ["Commits"]

log = logging.getLogger("priority_kafka.consumer")

Offsets = dict[TopicPartition, OffsetAndMetadata]
CommitCallback = Callable[[Offsets, Any], None]


def _log_auto_commit_failure(offsets: Any, error: BaseException) -> None:
    log.warning("Auto offset commit of %s failed: %r", offsets, error)


class Commits:
    """Plans and makes the commits of the ``levels`` (highest first) of one consumer.

    ``auto`` is whether auto-commit is on (``enable_auto_commit`` with a group), every
    ``timer.interval_s`` from inside ``poll()``, before a rebalance (the levels' hooks) and on
    close. Polling thread only.
    """

    def __init__(
        self,
        levels: Mapping[int, Level],
        delivered: DeliveredOffsets[TopicPartition],
        level_of: Callable[[TopicPartition], int],
        *,
        auto: bool,
        timer: AutoCommitTimer,
    ) -> None:
        self._levels = levels
        self._delivered = delivered
        self._level_of = level_of
        self.auto = auto
        self._timer = timer
        timer.reset(time.monotonic())

    def plan(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None
    ) -> dict[int, Offsets]:
        """The offsets each level commits: the given ones by level, or what was returned."""
        if offsets is None:
            plan = {}
            for number, level in self._levels.items():
                assigned = level.consumer.assignment()
                if assigned:
                    plan[number] = commit_offsets(self._delivered.of(assigned))
            return plan
        by_level: dict[int, Offsets] = {}
        for tp, offset in offsets.items():
            by_level.setdefault(self._level_of(tp), {})[tp] = offset
        return by_level

    def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None, timeout_ms: int | None
    ) -> None:
        """Commit synchronously, level by level."""
        for number, level_offsets in self.plan(offsets).items():
            self._levels[number].consumer.commit(offsets=level_offsets, timeout_ms=timeout_ms)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
        callback: CommitCallback | None,
    ) -> Future:
        """Commit asynchronously; ``callback`` once, with all levels' offsets merged and the
        first exception if any; the Future once every level's broker answered."""
        plan = {number: o for number, o in self.plan(offsets).items() if o}
        value = dict(offsets) if offsets is not None else None
        if not plan and callback is not None:
            callback({}, None)
        merged: Offsets = {}
        responses: list[Any] = []

        def level_called_back(level_offsets: Offsets, result: Any) -> None:
            # kafka-python runs these on the polling thread, one per level.
            merged.update(level_offsets)
            responses.append(result)
            if len(responses) == len(plan) and callback is not None:
                error = next((r for r in responses if isinstance(r, BaseException)), None)
                callback(dict(merged), error if error is not None else responses[-1])

        futures = [
            self._levels[number].consumer.commit_async(
                offsets=level_offsets, callback=level_called_back
            )
            for number, level_offsets in plan.items()
        ]
        return all_of(futures, value)

    def auto_commit_if_due(self) -> None:
        """With auto-commit, commit what was returned once the interval has passed."""
        if self.auto and self._timer.due(time.monotonic()):
            self.auto_commit_now()

    def auto_commit_now(self) -> None:
        """With auto-commit, commit what was returned, asynchronously (failures are logged)."""
        if not self.auto:
            return
        self._timer.reset(time.monotonic())
        for number, offsets in self.plan(None).items():
            if offsets:
                future = self._levels[number].consumer.commit_async(offsets=offsets)
                future.add_errback(_log_auto_commit_failure, offsets)

    def commit_on_close(self, timeout_ms: int | None) -> None:
        """With auto-commit, commit what was returned; a failure is logged, as kafka-python."""
        if not self.auto:
            return
        for number, offsets in self.plan(None).items():
            if offsets:
                try:
                    self._levels[number].consumer.commit(offsets=offsets, timeout_ms=timeout_ms)
                except Exception:
                    log.warning("Offset commit of %s on close failed.", offsets, exc_info=True)
