"""Records fetched from one level but not yet returned to the caller.

A level's consumer is asked for several ``max_poll_records`` at a time (``prefetch_polls``,
4 by default), and each ``poll()`` serves only that level's quota out of it: one kafka-python
``poll()`` then serves several priority polls, and each kafka-python ``poll()`` costs a round
trip to its IO thread. The buffer keeps the fetch order (so each partition's records stay in
offset order) and knows, per partition, the first offset it holds: the position a commit must
not go past. It knows about its bytes too (keys and values, sampled per fetch:
:mod:`~priority_kafka.record_size`), so a level can stop fetching ahead once they reach its share
of ``fetch_buffer_bytes``.
"""

from __future__ import annotations

import collections
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from priority_kafka.record_size import sampled_bytes

__all__ = ["PrefetchBuffer"]


#: What identifies a partition (a kafka ``TopicPartition``).
P = TypeVar("P", bound=Hashable)


class _Chunk(Generic[P]):
    """A run of one partition's records, ``records[start:]`` still unserved, and about the
    bytes of all of them (``size``, from a sample)."""

    __slots__ = ("partition", "records", "size", "start")

    def __init__(self, partition: P, records: Sequence[Any], start: int = 0) -> None:
        self.partition = partition
        self.records = records
        self.start = start
        self.size = sampled_bytes(records)

    def __len__(self) -> int:
        return len(self.records) - self.start

    def unserved_bytes(self) -> int:
        """The bytes of the unserved records, pro rata (exact for records of one size)."""
        return self.size * len(self) // len(self.records) if self.records else 0


class PrefetchBuffer(Generic[P]):
    """Fetched records (anything with an ``offset``) waiting to be served, in fetch order.

    ``take`` serves the oldest records first and skips partitions the caller has paused
    (their records wait, in order, until they are resumed); ``unread`` puts records back at
    the front; ``drop`` forgets a partition's records (revoked, or sought elsewhere).
    """

    def __init__(self) -> None:
        self._chunks: collections.deque[_Chunk[P]] = collections.deque()
        self._size = 0
        #: Mean bytes of the records last fetched (0 before any).
        self.record_size = 0

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"PrefetchBuffer({self._size} records, {len(self.partitions())} partitions)"

    def extend(self, batches: Mapping[P, Sequence[Any]]) -> None:
        """Append what one fetch returned (``{partition: [record, ...]}``)."""
        for partition, records in batches.items():
            if records:
                chunk = _Chunk(partition, records)
                self._chunks.append(chunk)
                self._size += len(records)
                self.record_size = max(1, chunk.size // len(records))

    def unread(self, batches: Mapping[P, Sequence[Any]]) -> None:
        """Put served records back in front, so they are served again first, in this order."""
        chunks = [_Chunk(p, list(records)) for p, records in batches.items() if records]
        self._chunks.extendleft(reversed(chunks))
        self._size += sum(len(chunk) for chunk in chunks)

    def bytes(self) -> int:
        """About the keys and values of the records here (of a partly served run, its share)."""
        return sum(chunk.unserved_bytes() for chunk in self._chunks)

    def available(self, paused: Collection[P] = ()) -> int:
        """How many records ``take`` could serve while ``paused`` partitions are paused."""
        if not paused:
            return self._size
        return sum(len(chunk) for chunk in self._chunks if chunk.partition not in paused)

    def take(
        self, limit: int, paused: Collection[P] = ()
    ) -> dict[P, list[Any]]:
        """Serve up to ``limit`` records, oldest first, none of the ``paused`` partitions."""
        if limit < 0:
            raise ValueError(f"'limit' must be >= 0 (got {limit!r}).")
        taken: dict[P, list[Any]] = {}
        skipped: list[_Chunk[P]] = []
        chunks = self._chunks
        while limit > 0 and chunks:
            chunk = chunks.popleft()
            if chunk.partition in paused:
                skipped.append(chunk)
                continue
            count = min(limit, len(chunk))
            end = chunk.start + count
            taken.setdefault(chunk.partition, []).extend(chunk.records[chunk.start : end])
            limit -= count
            self._size -= count
            if end < len(chunk.records):
                chunk.start = end
                chunks.appendleft(chunk)
                break
        chunks.extendleft(reversed(skipped))
        return taken

    def partitions(self) -> set[P]:
        """The partitions that have records here."""
        return {chunk.partition for chunk in self._chunks}

    def first_offsets(self) -> dict[P, int]:
        """Per partition, the offset of its oldest record here (where its consumer really is)."""
        first: dict[P, int] = {}
        for chunk in self._chunks:
            first.setdefault(chunk.partition, chunk.records[chunk.start].offset)
        return first

    def drop(self, partitions: Iterable[P]) -> dict[P, int]:
        """Forget the records of ``partitions``; return the first offset dropped per partition."""
        gone = set(partitions)
        dropped = {p: o for p, o in self.first_offsets().items() if p in gone}
        if dropped:
            kept = [chunk for chunk in self._chunks if chunk.partition not in gone]
            self._chunks = collections.deque(kept)
            self._size = sum(len(chunk) for chunk in kept)
        return dropped
