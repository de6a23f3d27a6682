"""Offsets and offset ranges of priority-topic partitions (pure: no I/O, no Kafka, no Spark).

A stream's position is the next offset to read of every priority-topic partition it reads,
kept in Spark's checkpoint as JSON in the layout of Spark's own Kafka source:
``{"orders-2": {"0": 42, "1": 7}}``. A micro-batch or a batch read is a set of
:class:`OffsetRange` (start inclusive, end exclusive), one Spark task each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from priority_kafka.errors import ConfigError
from priority_kafka.naming import split_priority_topic

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetRange",
    "PartitionOffsets",
    "TopicPartitionKey",
    "apportion",
    "offsets_from_json",
    "offsets_to_json",
    "plan_ranges",
    "split_ranges",
]

#: Offsets standing for "the earliest / latest available", as in Spark's offsets JSON.
EARLIEST = -2
LATEST = -1

TopicPartitionKey = tuple[str, int]
"""``(priority topic, partition)``: ``("orders-2", 0)``."""

PartitionOffsets = dict[TopicPartitionKey, int]


def offsets_to_json(offsets: Mapping[TopicPartitionKey, int]) -> dict[str, dict[str, int]]:
    """Return offsets as a JSON-ready dict, topics and partitions in sorted order.

    Spark compares two offsets by their JSON text, so equal offsets must serialize the same.
    """
    document: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        document.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return document


def offsets_from_json(document: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """The inverse of :func:`offsets_to_json`."""
    try:
        return {
            (topic, int(partition)): int(offset)
            for topic, partitions in document.items()
            for partition, offset in partitions.items()
        }
    except (AttributeError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"Offsets must look like {{'orders-2': {{'0': 42}}}} (got {document!r})."
        ) from exc


@attrs.frozen
class OffsetRange:
    """The records ``[start, end)`` of one priority-topic partition."""

    topic: str
    partition: int
    start: int
    end: int
    priority: int = attrs.field()

    @priority.default
    def _priority_of_topic(self) -> int:
        return split_priority_topic(self.topic)[1]

    @property
    def size(self) -> int:
        """How many offsets the range spans (records, unless some were compacted away)."""
        return self.end - self.start


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """Split ``total`` in proportion to ``weights`` (largest remainder), each share <= its weight.

    ``total`` must not exceed ``sum(weights)``; the shares sum to exactly ``total``. Ties in the
    remainders go to the earlier weight, so the result is deterministic.
    """
    whole = sum(weights)
    if total < 0 or total > whole or any(w < 0 for w in weights):
        raise ConfigError(
            f"'total' must be between 0 and the sum of non-negative 'weights' {whole} "
            f"(got total={total}, weights={list(weights)})."
        )
    if whole == 0:
        return [0 for _ in weights]
    shares = [total * w // whole for w in weights]
    remainders = sorted(
        range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i)
    )
    for i in remainders[: total - sum(shares)]:
        shares[i] += 1
    return shares


def plan_ranges(
    start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int]
) -> list[OffsetRange]:
    """The non-empty ranges from ``start`` to ``end``, highest priority first.

    A partition missing from ``start`` starts at 0; one missing from ``end`` is not read.
    """
    ranges = [
        OffsetRange(topic, partition, start.get((topic, partition), 0), stop)
        for (topic, partition), stop in end.items()
        if stop > start.get((topic, partition), 0)
    ]
    return sorted(ranges, key=lambda r: (-r.priority, r.topic, r.partition))


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges so there are at least ``min_partitions`` of them, as Spark's Kafka source does.

    Each range gets a number of pieces proportional to its size (at least one) and is cut into
    near-equal consecutive pieces; with ``min_partitions`` None or already met, nothing changes.
    """
    ranges = list(ranges)
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    pieces: list[OffsetRange] = []
    for whole in ranges:
        parts = min(whole.size, max(1, round(whole.size / total * min_partitions)))
        base, extra = divmod(whole.size, parts)
        offset = whole.start
        for part in range(parts):
            size = base + (part < extra)
            pieces.append(attrs.evolve(whole, start=offset, end=offset + size))
            offset += size
    return pieces
