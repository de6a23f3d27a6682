"""A kafka-python PriorityConsumer's partition-level calls, each sent to the level that owns it.

``pause(TopicPartition("orders-2", 0), TopicPartition("orders-0", 1))`` becomes a ``pause`` on
level 2's consumer and one on level 0's; ``end_offsets`` asks each level for its partitions and
merges the answers; ``assignment()`` is the union of every level's. A partition of no level
(not a priority topic, or a level outside ``max_priority``) is rejected before any level is
called (:meth:`~priority_kafka._levels.LevelRouter.group`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from priority_kafka._levels import LevelRouter
from priority_kafka.kafka_python._kafka import TopicPartition
from priority_kafka.kafka_python.consumer._level import Level

__all__ = ["LevelCalls"]


def _topic_of(partition: TopicPartition) -> str:
    if not isinstance(partition, TopicPartition):
        raise TypeError(f"Expected a kafka.TopicPartition (got {partition!r}).")
    return partition.topic


class LevelCalls:
    """Routes calls over ``levels`` (highest first) by ``router``."""

    __slots__ = ("_levels", "_router")

    def __init__(self, levels: Mapping[int, Level], router: LevelRouter) -> None:
        self._levels = levels
        self._router = router

    def level_of(self, partition: TopicPartition) -> int:
        """The level of a priority-topic partition (TypeError for anything else)."""
        return self._router.level_of(_topic_of(partition))

    def group(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """``partitions`` by level, each checked before any is returned."""
        return self._router.group(partitions, _topic_of)

    def consumer_of(self, partition: TopicPartition) -> Any:
        """The consumer of ``partition``'s level."""
        return self._levels[self.level_of(partition)].consumer

    def any_consumer(self) -> Any:
        """A level's consumer, for cluster-wide calls (metadata)."""
        return next(iter(self._levels.values())).consumer

    def each(self, method: str, partitions: Iterable[TopicPartition]) -> None:
        """``consumer.method(*its partitions)`` on each level given some."""
        for number, group in self.group(partitions).items():
            getattr(self._levels[number].consumer, method)(*group)

    def each_assigned(self, method: str) -> None:
        """``consumer.method()`` on each level with an assignment."""
        for level in self._levels.values():
            if level.consumer.assignment():
                getattr(level.consumer, method)()

    def merged(
        self,
        method: str,
        partitions: Iterable[TopicPartition] | Mapping[TopicPartition, Any],
        **kwargs: Any,
    ) -> dict[TopicPartition, Any]:
        """Each level's ``consumer.method(its partitions, **kwargs)``, the dicts merged; for a
        mapping, each level gets its partitions' entries."""
        result: dict[TopicPartition, Any] = {}
        for number, group in self.group(partitions).items():
            given: Any = (
                {tp: partitions[tp] for tp in group} if isinstance(partitions, Mapping) else group
            )
            result.update(getattr(self._levels[number].consumer, method)(given, **kwargs))
        return result

    def union(self, method: str) -> set[TopicPartition]:
        """The union of every level's ``consumer.method()`` (``assignment``, ``paused``)."""
        return set().union(*(getattr(level.consumer, method)() for level in self._levels.values()))
