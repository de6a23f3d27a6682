"""The confluent PriorityConsumer's calls that take priority-topic partitions, each made on the
consumer of the level that owns them (a base class of the front-end)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from confluent_kafka import Consumer, Message, TopicPartition

from priority_kafka._levels import LevelRouter
from priority_kafka.confluent._config import InvalidArgError, invalid_arg
from priority_kafka.confluent._renewal import Level

__all__ = ["LevelRouted"]


class LevelRouted:
    """Routes partition-level calls to the levels' consumers; the front-end sets ``_router``
    and ``_by_level`` on creation and checks it is open in ``_check_open``."""

    __slots__ = ()

    _router: LevelRouter
    _by_level: dict[int, Level]

    def _check_open(self) -> None:
        raise NotImplementedError

    def store_offsets(
        self, message: Message | None = None, offsets: Sequence[TopicPartition] | None = None
    ) -> None:
        """Store a message's offset + 1, or the given offsets, for the next commit."""
        self._check_open()
        if (message is None) == (offsets is None):
            raise InvalidArgError("store_offsets() takes a message or offsets, exactly one.")
        if message is not None:
            self._level_of(message.topic()).consumer.store_offsets(message=message)
        else:
            self._per_group("store_offsets", offsets or (), keyword="offsets")

    def committed(
        self, partitions: Sequence[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        """Committed offsets of priority-topic partitions, in the order given."""
        return self._gather(partitions, lambda c, g: c.committed(g, timeout=timeout))

    def consumer_group_metadata(self, partition: TopicPartition) -> Any:
        """The group metadata of the level that consumes ``partition`` (in its group
        ``<group.id>-<level>``), for a transactional producer's
        ``send_offsets_to_transaction``."""
        return self._level_of(partition.topic).consumer.consumer_group_metadata()

    def position(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        """Offsets of the next messages ``consume()`` returns, in the order given."""
        return self._gather(partitions, lambda c, g: c.position(g))

    def offsets_for_times(
        self, partitions: Sequence[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        """Earliest offsets with timestamps at least the given ones (in ``offset``)."""
        return self._gather(partitions, lambda c, g: c.offsets_for_times(g, timeout=timeout))

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int] | None:
        """Low and high watermarks of a priority-topic partition."""
        consumer = self._level_of(partition.topic).consumer
        if timeout is None:
            return consumer.get_watermark_offsets(partition, cached=cached)
        return consumer.get_watermark_offsets(partition, timeout=timeout, cached=cached)

    def seek(self, partition: TopicPartition) -> None:
        """Move a priority-topic partition to ``partition.offset``."""
        self._level_of(partition.topic).consumer.seek(partition)

    # -- helpers ----------------------------------------------------------------------------

    def _level_of(self, topic: str | None) -> Level:
        self._check_open()
        with invalid_arg():
            return self._by_level[self._router.level_of(topic or "")]

    def _group(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        self._check_open()
        with invalid_arg():
            return self._router.group(partitions)

    def _per_group(
        self, method: str, partitions: Iterable[TopicPartition], keyword: str | None = None
    ) -> None:
        self._check_open()
        for level, group in self._group(partitions).items():
            call = getattr(self._by_level[level].consumer, method)
            call(**{keyword: group}) if keyword else call(group)

    def _gather(
        self,
        partitions: Sequence[TopicPartition],
        call: Callable[[Consumer, list[TopicPartition]], list[TopicPartition]],
    ) -> list[TopicPartition]:
        """Run ``call`` per level on its partitions; the results in the order given."""
        self._check_open()
        with invalid_arg():
            return self._router.gather(
                partitions,
                lambda level, group: call(self._by_level[level].consumer, group),
                key=lambda tp: (tp.topic, tp.partition),
            )
