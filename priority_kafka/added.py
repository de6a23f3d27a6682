"""Which assigned partitions were added to their topic after a level's first assignment.

Kafka resets a partition without a committed offset to ``auto_offset_reset``; for a partition
added to a topic while its group runs, ``latest`` skips every record produced to it before the
consumer's metadata refresh noticed it (KAFKA-12478). A priority consumer reads such a
partition from its start instead, as Flink's and Spark's Kafka sources do; the reset policy
still applies to a group's first start. This module only decides *which* partitions those are
(pure; each client family asks its broker about commits and seeks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

__all__ = ["AddedPartitions"]


class AddedPartitions:
    """One level's record of its topics' partition counts, taken at its first assignment.

    A partition counts as *added* when its topic was known then and its number is at least the
    count known then. A topic first seen later (a new topic matching a pattern) is recorded at
    that first sight: its partitions get the reset policy, like a group's first start. The
    record lives as long as the consumer: a consumer started after partitions were added
    counts them as existing (the group's committed offsets still win, as always).
    """

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[str, int] | None = None

    def added(
        self,
        assigned: Iterable[tuple[str, int]],
        partition_counts: Callable[[], Mapping[str, int]],
    ) -> list[tuple[str, int]]:
        """The ``(topic, partition)`` pairs of ``assigned`` added since the first assignment.

        ``partition_counts`` gives every topic's partition count as the client knows it now;
        it is asked at the first assignment and when a topic is seen for the first time.
        """
        assigned = list(assigned)
        if self._known is None:
            self._known = dict(partition_counts())
            return []
        unseen = {topic for topic, _ in assigned if topic not in self._known}
        if unseen:
            counts = partition_counts()
            # First sight of a topic: all of it counts as existing, the largest we saw.
            for topic in unseen:
                self._known[topic] = max(
                    [counts.get(topic, 0)] + [p + 1 for t, p in assigned if t == topic])
        return sorted((t, p) for t, p in assigned if p >= self._known[t])

    def __repr__(self) -> str:
        return f"AddedPartitions(known={self._known!r})"
