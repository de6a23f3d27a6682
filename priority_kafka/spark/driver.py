"""The driver's Kafka calls: which partitions to read, their offsets, and group commits.

Only the Spark driver uses this (from the batch reader's planning and the stream reader's
``initialOffset``/``latestOffset``/``commit``); executors never talk to Kafka except to read
their range. Every call is bounded by kafka-python's ``request_timeout_ms``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from priority_kafka.errors import ConfigError
from priority_kafka.naming import (
    level_group_id,
    level_pattern,
    priority_topics,
    split_priority_topic,
)
from priority_kafka.spark.client import new_consumer
from priority_kafka.spark.errors import DataLossError
from priority_kafka.spark.options import OffsetSpec, SourceOptions
from priority_kafka.spark.ranges import EARLIEST, LATEST, PartitionOffsets, TopicPartitionKey

__all__ = ["KafkaDriver"]

log = logging.getLogger(__name__)


class KafkaDriver:
    """Metadata and offset look-ups for one source, over one kafka-python consumer.

    Create it lazily on the driver (it holds sockets, so it is never pickled to executors) and
    :meth:`close` it when the reader stops.
    """

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._consumer = new_consumer(options)
        self._committers: dict[int, KafkaConsumer] = {}

    def partitions(self) -> list[TopicPartitionKey]:
        """The priority-topic partitions the options select, as they exist now.

        Subscribed topics that do not exist (yet) are left out, as Spark's Kafka source does; a
        level without its topic simply has nothing to read.
        """
        selection = self._options.topics
        if selection.assign:
            return list(selection.assign)
        existing = self._consumer.topics()
        if selection.pattern is not None:
            patterns = [
                re.compile(level_pattern(selection.pattern, level))
                for level in range(self._options.max_priority)
            ]
            topics = [t for t in existing if any(p.match(t) for p in patterns)]
        else:
            topics = [
                topic
                for logical in selection.subscribe
                for topic in priority_topics(logical, self._options.max_priority)
                if topic in existing
            ]
        return sorted(
            (topic, partition)
            for topic in topics
            for partition in self._consumer.partitions_for_topic(topic) or ()
        )

    def earliest(self, partitions: list[TopicPartitionKey]) -> PartitionOffsets:
        """The first offset still in the log of each partition."""
        tps = [TopicPartition(*key) for key in partitions]
        found = self._consumer.beginning_offsets(tps) if tps else {}
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def latest(self, partitions: list[TopicPartitionKey]) -> PartitionOffsets:
        """The offset the next record of each partition will get (the high watermark)."""
        tps = [TopicPartition(*key) for key in partitions]
        found = self._consumer.end_offsets(tps) if tps else {}
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def resolve(
        self, name: str, spec: OffsetSpec, partitions: list[TopicPartitionKey]
    ) -> PartitionOffsets:
        """Turn ``startingOffsets``/``endingOffsets`` into offsets for ``partitions``.

        Partitions the JSON form does not list get the keyword default of the option: earliest
        for ``startingOffsets``, latest for ``endingOffsets``. JSON partitions that do not exist
        are an error.
        """
        if isinstance(spec, str):
            explicit: Mapping[TopicPartitionKey, int] = {}
            default = EARLIEST if spec == "earliest" else LATEST
        else:
            explicit = spec
            default = EARLIEST if name == "startingOffsets" else LATEST
            unknown = sorted(set(explicit) - set(partitions))
            if unknown:
                raise ConfigError(
                    f"Option '{name}' names partitions that are not read or do not exist: "
                    f"{unknown} (reading {partitions})."
                )
        wanted = {tp: explicit.get(tp, default) for tp in partitions}
        earliest = self.earliest([tp for tp, o in wanted.items() if o == EARLIEST])
        latest = self.latest([tp for tp, o in wanted.items() if o == LATEST])
        return {tp: earliest.get(tp, latest.get(tp, offset)) for tp, offset in wanted.items()}

    def check_start(self, start: Mapping[TopicPartitionKey, int], latest: PartitionOffsets) -> None:
        """Report partitions that vanished or whose log now ends before ``start`` as data loss.

        Their records between the old position and now are gone (a deleted or recreated topic).
        Raises DataLossError with failOnDataLoss, otherwise logs a warning.
        """
        problems = [
            f"{topic} partition {partition}: was at offset {offset}, "
            + ("the partition no longer exists" if (topic, partition) not in latest
               else f"the log now ends at {latest[(topic, partition)]}")
            for (topic, partition), offset in sorted(start.items())
            if (topic, partition) not in latest or latest[(topic, partition)] < offset
        ]
        if not problems:
            return
        message = "Some data may have been lost: " + "; ".join(problems) + "."
        if self._options.fail_on_data_loss:
            raise DataLossError(
                message + " Set the option failOnDataLoss to 'false' to go on from the current "
                "offsets with a warning instead."
            )
        log.warning("%s Going on from the current offsets (failOnDataLoss is false).", message)

    def commit(self, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Commit ``offsets`` to ``kafka.group.id``, level ``i`` to group ``<group.id>-i``.

        The per-level groups are the ones a PriorityConsumer with the same group id uses, so
        ``kafka-consumer-groups --describe`` shows the pipeline's lag per priority level.
        """
        group = self._options.group_id
        if group is None:
            return
        by_level: dict[int, dict[TopicPartition, OffsetAndMetadata]] = {}
        for (topic, partition), offset in offsets.items():
            level = split_priority_topic(topic)[1]
            by_level.setdefault(level, {})[TopicPartition(topic, partition)] = (
                OffsetAndMetadata(offset, "", -1)
            )
        for level, level_offsets in by_level.items():
            committer = self._committers.get(level)
            if committer is None:
                committer = new_consumer(self._options, group_id=level_group_id(group, level))
                self._committers[level] = committer
            committer.commit(level_offsets)

    def close(self) -> None:
        """Close every consumer this driver opened."""
        for consumer in [self._consumer, *self._committers.values()]:
            consumer.close()
        self._committers.clear()

    def __repr__(self) -> str:
        return f"KafkaDriver(bootstrap_servers={self._options.bootstrap_servers!r})"
