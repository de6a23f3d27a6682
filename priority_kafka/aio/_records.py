"""The aiokafka family's records and partitions.

aiokafka's ``ConsumerRecord`` already has kafka-python's field names (``topic``, ``partition``,
``offset``, ``key``, ``value``, ``headers``, ``timestamp``, the serialized sizes), so the
executor takes it as it is; what this role holds is the conversion of partitions and offsets
between the package's own structs and aiokafka's, and the grouping of a flat list of records
back into aiokafka's ``getmany`` shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import ConsumerRecord, TopicPartition

from priority_kafka._checks import shown

__all__ = ["ConsumerRecord", "aio_offsets", "aio_partitions", "by_partition"]


def aio_partitions(partitions: Iterable[Any]) -> list[TopicPartition]:
    """Partitions of any ``(topic, partition)`` shape as aiokafka's ``TopicPartition``."""
    return [
        tp if tp.__class__ is TopicPartition else TopicPartition(tp.topic, tp.partition)
        for tp in partitions
    ]


def aio_offsets(offsets: Mapping[Any, Any]) -> dict[TopicPartition, tuple[int, str]]:
    """Offsets (per partition a plain offset, an ``(offset, metadata)`` pair, or either
    family's ``OffsetAndMetadata``) as aiokafka's ``commit()`` takes them: ``(offset,
    metadata)`` per aiokafka ``TopicPartition``; ValueError naming a bad one."""
    converted = {}
    for tp, meta in offsets.items():
        if isinstance(meta, int) and not isinstance(meta, bool):
            pair = (meta, "")
        elif isinstance(meta, tuple) and len(meta) >= 2 and isinstance(meta[0], int):
            pair = (meta[0], meta[1] or "")
        else:
            raise ValueError(
                f"the offset of {tp} must be an int, (offset, metadata) or OffsetAndMetadata "
                f"(got {shown(meta)})"
            )
        converted[TopicPartition(tp.topic, tp.partition)] = pair
    return converted


def by_partition(records: list[Any]) -> dict[TopicPartition, list[Any]]:
    """A flat list of records (each partition's in offset order) grouped by partition, in the
    order the partitions first appear."""
    grouped: dict[TopicPartition, list[Any]] = {}
    last: tuple[str, int] | None = None
    batch: list[Any] = []
    for record in records:
        key = (record.topic, record.partition)
        if key != last:
            tp = TopicPartition(*key)
            batch = grouped.setdefault(tp, [])
            last = key
        batch.append(record)
    return grouped
