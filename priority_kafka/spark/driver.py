"""The driver's Kafka calls: which partitions to read, their offsets, and group commits.

Only the Spark driver uses this (from the batch reader's planning and the stream reader's
``initialOffset``/``latestOffset``/``commit``); executors never talk to Kafka except to read
their range. :func:`open_driver` builds the driver of the family the ``client`` option names,
its Spark adapter's ``Driver`` (:meth:`priority_kafka.families.Family.spark`:
``kafka_python/_spark.py``, ``confluent/_spark.py``), a :class:`KafkaDriver` whose every call is
bounded by the ``kafka.request.timeout.ms`` option (30 s by default); only the chosen family's
library is imported.
"""

from __future__ import annotations

import contextlib
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from priority_kafka.errors import ConfigError, PriorityKafkaError
from priority_kafka.families import family
from priority_kafka.naming import (
    check_subscription,
    common_levels,
    level_group_id,
    level_pattern,
    priority_topics,
    split_priority_topic,
)
from priority_kafka.spark.errors import DataLossError, KafkaCallError
from priority_kafka.spark.options import OffsetSpec, SourceOptions
from priority_kafka.spark.ranges import EARLIEST, LATEST, PartitionOffsets, TopicPartitionKey

__all__ = ["KafkaDriver", "concerning", "open_driver"]

log = logging.getLogger(__name__)


def open_driver(options: SourceOptions) -> KafkaDriver:
    """The driver for ``options.client`` (its family's Spark adapter); the caller closes it."""
    driver: KafkaDriver = family(options.client).spark().Driver(options)
    return driver


class KafkaDriver(ABC):
    """Metadata and offset look-ups for one source, over one client's consumer.

    Create it lazily on the driver (it holds sockets, so it is never pickled to executors) and
    :meth:`close` it when the reader stops.
    """

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        with self._calling("connecting"):
            self._consumer = self._open(None)
        self._committers: dict[str, Any] = {}  # group -> its consumer

    @staticmethod
    @abstractmethod
    def _client_errors() -> tuple[type[BaseException], ...]:
        """The exceptions this client raises for a failed call."""

    @contextlib.contextmanager
    def _calling(self, what: str, partitions: Iterable[TopicPartitionKey] = ()) -> Iterator[None]:
        """Turn the client's bare error into a :class:`KafkaCallError` naming the bootstrap
        address and the partitions concerned (librdkafka says "Local: Unknown partition")."""
        try:
            yield
        except PriorityKafkaError:
            raise
        except self._client_errors() as exc:
            raise KafkaCallError(
                f"{what} from {self._options.bootstrap_servers} failed"
                f"{concerning(sorted(partitions))}: {exc}"
            ) from exc

    @abstractmethod
    def _open(self, group_id: str | None) -> Any:
        """A new consumer of this client outside any group's membership (``group_id`` only
        for commits)."""

    @abstractmethod
    def _existing_topics(self) -> Iterable[str]:
        """Names of the topics in the cluster (a metadata request; never creates one)."""

    @abstractmethod
    def _partitions_of(self, topic: str) -> Iterable[int]:
        """Partition ids of an existing ``topic``, from the last metadata."""

    @abstractmethod
    def _earliest(self, partitions: list[TopicPartitionKey]) -> PartitionOffsets:
        """See :meth:`earliest`."""

    @abstractmethod
    def _latest(self, partitions: list[TopicPartitionKey]) -> PartitionOffsets:
        """See :meth:`latest`."""

    def earliest(self, partitions: list[TopicPartitionKey]) -> PartitionOffsets:
        """The first offset still in the log of each partition."""
        with self._calling("looking up the earliest offsets", partitions):
            return self._earliest(partitions)

    def latest(self, partitions: list[TopicPartitionKey]) -> PartitionOffsets:
        """The offset the next record of each partition will get (the high watermark)."""
        with self._calling("looking up the latest offsets", partitions):
            return self._latest(partitions)

    @abstractmethod
    def _commit(self, committer: Any, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Commit ``offsets`` synchronously with ``committer`` (a consumer of their group)."""

    def discovered_levels(self) -> int:
        """The levels the subscribed logical topics have on the broker (``orders-0`` ..
        ``orders-<N-1>``, contiguous; each topic as many): the ``maxPriority`` of a source
        that does not give it. Raises MissingTopicsError naming a topic without levels."""
        subscribed = self._options.topics.subscribe
        with self._calling("reading the topics' metadata"):
            existing = set(self._existing_topics())
        return common_levels(subscribed, existing, setting="maxPriority", advice="read them "
                             "in one source per number of levels, or give 'maxPriority'")

    def partitions(self) -> list[TopicPartitionKey]:
        """The priority-topic partitions the options select, as they exist now.

        Subscribed topics that do not exist (yet) are left out, as Spark's Kafka source does
        (logged as a warning naming them); a level without its topic simply has nothing to read.
        A level topic at or above ``maxPriority`` that exists raises ConfigError naming it: its
        records would never be read.
        """
        selection = self._options.topics
        if selection.assign:
            return list(selection.assign)
        with self._calling("reading the topics' metadata"):
            existing = set(self._existing_topics())
        for missing in check_subscription(
            selection.subscribe, selection.pattern, existing, self._options.max_priority,
            wait_for_topics=True, setting="maxPriority",
        ):
            log.warning("%s; reading the levels that exist", missing)
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
            (topic, partition) for topic in topics for partition in self._partitions_of(topic)
        )

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
        by_level: dict[int, dict[TopicPartitionKey, int]] = {}
        for (topic, partition), offset in offsets.items():
            level = split_priority_topic(topic)[1]
            by_level.setdefault(level, {})[(topic, partition)] = offset
        for level, level_offsets in by_level.items():
            name = level_group_id(group, level)
            with self._calling(f"committing group {name!r}", level_offsets):
                committer = self._committers.get(name)
                if committer is None:
                    committer = self._committers[name] = self._open(name)
                self._commit(committer, level_offsets)

    def close(self) -> None:
        """Close every consumer this driver opened."""
        for consumer in [self._consumer, *self._committers.values()]:
            consumer.close()
        self._committers.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(bootstrap_servers={self._options.bootstrap_servers!r})"


def concerning(partitions: list[TopicPartitionKey]) -> str:
    """`` for topic t partition p`` (up to three named), or a count with the topics."""
    if not partitions:
        return ""
    if len(partitions) <= 3:
        return " for " + ", ".join(f"topic {t} partition {p}" for t, p in partitions)
    topics = sorted({topic for topic, _ in partitions})
    return f" for {len(partitions)} partitions of {', '.join(topics)}"
