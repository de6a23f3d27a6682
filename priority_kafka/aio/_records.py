"""The aiokafka family's records and partitions.

aiokafka's ``ConsumerRecord`` already has kafka-python's field names (``topic``, ``partition``,
``offset``, ``key``, ``value``, ``headers``, ``timestamp``, the serialized sizes), so the
executor takes it as it is; what this role holds is the conversion of partitions and offsets
between the package's own structs and aiokafka's, and the grouping of a flat list of records
of records into aiokafka's ``getmany`` shape (:class:`LevelBuffer`, :func:`grouped`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import ConsumerRecord, TopicPartition

from priority_kafka._checks import shown

__all__ = [
    "ConsumerRecord", "LevelBuffer", "aio_offsets", "aio_partitions", "grouped",
]


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


class LevelBuffer:
    """What one level's consumer returned for the take under way, as aiokafka grouped it:
    ``(partition, records)`` chunks, each partition's records in offset order. Taking hands
    out whole lists or slices of them (C-speed copies, no work per record) and notes each piece
    taken, so the records need no grouping again afterwards."""

    __slots__ = ("chunks", "held")

    def __init__(self) -> None:
        self.chunks: list[tuple[TopicPartition, list[Any]]] = []
        #: How many records the chunks hold.
        self.held = 0

    def fill(self, batch: Mapping[TopicPartition, list[Any]]) -> None:
        """Add what a level's ``getmany`` returned."""
        for tp, records in batch.items():
            self.chunks.append((tp, records))
            self.held += len(records)

    def take(self, want: int, pieces: list[tuple[TopicPartition, list[Any]]]) -> list[Any]:
        """The first ``want`` records (fewer if it holds fewer), each piece noted in
        ``pieces``."""
        chunks = self.chunks
        if chunks and len(chunks[0][1]) == want:  # the usual take: one whole chunk, no copy
            tp, taken = chunks.pop(0)
            pieces.append((tp, taken))
            self.held -= want
            return taken
        taken = []
        while chunks and len(taken) < want:
            tp, records = chunks[0]
            room = want - len(taken)
            if len(records) <= room:
                chunks.pop(0)
                piece = records
            else:
                piece, chunks[0] = records[:room], (tp, records[room:])
            pieces.append((tp, piece))
            taken += piece
        self.held -= len(taken)
        return taken

    def drop(self) -> None:
        """Forget what it holds (a seek moved the position back before it)."""
        self.chunks.clear()
        self.held = 0


def grouped(
    by_level: list[list[tuple[TopicPartition, list[Any]]]],
) -> dict[TopicPartition, list[Any]]:
    """The pieces a take noted, one list per level highest first, by partition: highest level
    first (a burst's pieces, taken after the lower levels' shares, are in their level's list),
    each partition's records in the order taken."""
    found: dict[TopicPartition, list[Any]] = {}
    for pieces in by_level:
        for tp, records in pieces:
            held = found.get(tp)
            found[tp] = records if held is None else held + records
    return found
