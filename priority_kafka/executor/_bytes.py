"""The bytes the executor holds per partition: keys and values received since the watermark.

The executor bounds what it holds in records (``max_in_flight_per_partition``) and in bytes
(``max_in_flight_bytes``): a count alone lets 1,000 records of 1 MB each through. Bytes are
counted per *chunk*, the records one poll returned for one partition, and a chunk is released
once the partition's commit watermark has passed its last offset; so the count is what a crash
would replay, as for the record bound, rounded up to whole polls, at the cost of one sum per
poll and partition (:func:`~priority_kafka.record_size.record_bytes`; no per-record
bookkeeping on the workers' side).

Pure: no Kafka, threads or clocks; the caller serialises access.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["ReceivedBytes"]

P = TypeVar("P", bound=Hashable)


class ReceivedBytes(Generic[P]):
    """Per partition, the bytes of its records received since its commit watermark.

    :meth:`receive` adds a chunk (a poll's records of the partition: its last offset and its
    bytes); :meth:`release` drops the chunks the watermark has passed and returns what is left.
    """

    __slots__ = ("_chunks", "_totals")

    def __init__(self) -> None:
        self._chunks: dict[P, deque[tuple[int, int]]] = {}
        self._totals: dict[P, int] = {}

    def __repr__(self) -> str:
        return f"ReceivedBytes(partitions={len(self._totals)}, bytes={self.total()})"

    def receive(self, partition: P, last_offset: int, size: int) -> None:
        """Records of ``partition`` up to ``last_offset`` were received: ``size`` bytes."""
        chunks = self._chunks.get(partition)
        if chunks is None:
            chunks = self._chunks[partition] = deque()
            self._totals[partition] = 0
        chunks.append((last_offset, size))
        self._totals[partition] += size

    def release(self, partition: P, watermark: int | None) -> int:
        """Drop the chunks of ``partition`` wholly below ``watermark`` (the lowest offset not
        done; None: nothing received); return the bytes left."""
        chunks = self._chunks.get(partition)
        if not chunks:
            return 0
        if watermark is not None:
            total = self._totals[partition]
            while chunks and chunks[0][0] < watermark:
                total -= chunks.popleft()[1]
            self._totals[partition] = total
        return self._totals[partition]

    def of(self, partition: P) -> int:
        """The bytes of ``partition`` counted now (as of the last :meth:`release`)."""
        return self._totals.get(partition, 0)

    def total(self) -> int:
        """The bytes of every partition counted now."""
        return sum(self._totals.values())

    def forget(self, partition: P) -> None:
        """Stop counting ``partition`` (revoked, lost)."""
        self._chunks.pop(partition, None)
        self._totals.pop(partition, None)
