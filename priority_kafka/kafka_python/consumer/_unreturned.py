"""Records a kafka-python PriorityConsumer fetched and has not returned yet.

They wait in two places: each level's prefetch buffer
(:class:`~priority_kafka.kafka_python.consumer._level.Level`), and, for iteration, the records
taken from the levels but not yet yielded. :class:`Unreturned`
puts records back where they came from and forgets them for a seek, an assignment or a
rebalance, so what a poll returns next, and what a commit covers, never skips one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from priority_kafka.kafka_python._kafka import ConsumerRecord, TopicPartition
from priority_kafka.kafka_python.consumer._level import Level, Records

__all__ = ["Unreturned"]

Grouper = Callable[[Iterable[TopicPartition]], dict[int, list[TopicPartition]]]


def _by_partition(records: Iterable[ConsumerRecord]) -> Records:
    batches: Records = {}
    for record in records:
        batches.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
    return batches


class Unreturned:
    """The ``levels``' buffers (highest first) and the iteration's records; ``group`` splits
    partitions by level (and rejects one of no level)."""

    __slots__ = ("_group", "_levels", "iteration")

    def __init__(self, levels: Mapping[int, Level], group: Grouper) -> None:
        self._levels = levels
        self._group = group
        #: Records fetched for iteration and not yet yielded (undeserialized).
        self.iteration: deque[ConsumerRecord] = deque()

    def unread(self, records: Mapping[TopicPartition, Sequence[ConsumerRecord]]) -> None:
        """Put records taken from the levels back in front, in the same order."""
        for number, partitions in self._group(records).items():
            self._levels[number].unread({tp: records[tp] for tp in partitions})

    def put_back_iteration(self) -> None:
        """Records fetched for iteration but not yet yielded go back to their levels' buffers.

        Called at the start of poll, seek, pause, position and the like, never from a
        rebalance hook, so the deque is only touched by the polling thread.
        """
        if self.iteration:
            batches = _by_partition(self.iteration)
            self.iteration.clear()
            self.unread(batches)

    def drop(self, partitions: Iterable[TopicPartition] | None = None, *, rewind: bool) -> None:
        """Forget the buffered records of ``partitions`` (None: of every partition)."""
        self.put_back_iteration()
        if partitions is None:
            for level in self._levels.values():
                level.drop(level.buffer.partitions(), rewind=rewind)
            return
        for number, group in self._group(partitions).items():
            self._levels[number].drop(group, rewind=rewind)
