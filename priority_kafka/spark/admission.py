"""Admission control: how many records each priority level may add to a micro-batch (pure).

Spark's own Kafka source splits ``maxOffsetsPerTrigger`` across partitions by backlog alone.
Here the limit is first split across priority levels exactly as the priority consumer splits
``max_poll_records``: the configured distributor reserves a quota per level and a
:class:`~priority_kafka.burst.CapacityBurst` lends the unused quota of levels that have been
idle for a whole window to one busy level. Each trigger is one "poll": the burst windows record
what each level actually took. When a lending level has backlog again in the very trigger that
lends its share, the borrower gives way (:func:`priority_kafka.burst.allocate`, the rule the
priority consumer uses too), so a batch never exceeds the limit (Spark's ``ReadMaxRows``
contract) and every level with backlog still gets its reserved share. A level's admitted count
is then split across its partitions in proportion to their backlog.

No I/O: the stream reader passes in the start offsets and the latest available offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from priority_kafka.burst import CapacityBurst, allocate
from priority_kafka.naming import split_priority_topic
from priority_kafka.spark.ranges import PartitionOffsets, TopicPartitionKey, apportion

__all__ = ["Admission", "AdmissionControl"]


@attrs.frozen
class Admission:
    """One trigger's decision; every per-level dict is keyed highest level first."""

    #: The batch's end offsets (exclusive) for every partition in ``latest``.
    end: PartitionOffsets
    #: Records each level had waiting (offsets between start and latest).
    available: dict[int, int]
    #: Each level's limit for this trigger (reserved quota, plus the burst for one level);
    #: empty when the trigger had no limit.
    quotas: dict[int, int]
    #: Records each level was admitted (:func:`~priority_kafka.burst.allocate`).
    admitted: dict[int, int]
    bursting_level: int | None


@attrs.define(eq=False)
class AdmissionControl:
    """Plans each trigger's end offsets; keeps the burst windows between triggers.

    ``new_burst(limit)`` makes the CapacityBurst for a trigger limit (the distributor's split of
    ``limit``); it is remade when the engine's limit changes. Not thread-safe: the stream
    reader's driver-side calls own it.
    """

    max_priority: int
    new_burst: Callable[[int], CapacityBurst]
    _burst: CapacityBurst | None = attrs.field(default=None, init=False)
    _limit: int | None = attrs.field(default=None, init=False)

    def admit(
        self,
        start: Mapping[TopicPartitionKey, int],
        latest: Mapping[TopicPartitionKey, int],
        limit: int | None,
    ) -> Admission:
        """Return the end offsets of the next batch from ``start`` toward ``latest``.

        ``limit`` None admits everything available (``ReadAllAvailable``); otherwise at most
        ``limit`` records in total, and each level at least ``min(reserved, available)``.
        Partitions in
        ``latest`` but not in ``start`` start at offset 0; a partition whose latest offset is
        below its start is not read (the caller decides whether that is data loss).
        """
        backlog = {tp: max(0, latest[tp] - start.get(tp, 0)) for tp in latest}
        by_level: dict[int, list[TopicPartitionKey]] = {
            level: [] for level in reversed(range(self.max_priority))
        }
        for tp in sorted(backlog):
            by_level[split_priority_topic(tp[0])[1]].append(tp)
        available = {
            level: sum(backlog[tp] for tp in tps) for level, tps in by_level.items()
        }
        quotas: dict[int, int] = {}
        bursting = None
        if limit is None:
            admitted = dict(available)
        else:
            burst = self._burst_for(limit)
            quotas = burst.quotas()
            bursting = burst.bursting_level
            admitted = allocate(quotas, available, limit, bursting)
            burst.record(admitted)
        end = {tp: max(start.get(tp, 0), latest[tp]) for tp in latest}
        for level, tps in by_level.items():
            shares = apportion(admitted[level], [backlog[tp] for tp in tps])
            for tp, share in zip(tps, shares, strict=True):
                if backlog[tp]:
                    end[tp] = start.get(tp, 0) + share
        return Admission(end, available, quotas, admitted, bursting)

    def _burst_for(self, limit: int) -> CapacityBurst:
        if self._burst is None or limit != self._limit:
            self._burst, self._limit = self.new_burst(limit), limit
        return self._burst
