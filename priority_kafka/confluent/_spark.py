"""The Spark source on confluent-kafka: the driver's metadata, offset and commit calls
(:class:`ConfluentDriver`, each bounded by the ``kafka.request.timeout.ms`` option) and an
executor's range reader (:class:`ConfluentReader`, librdkafka fetching and decoding in C).

The registry finds this module through :meth:`priority_kafka.families.Family.spark` (``Driver``
and ``Reader``); a stream reading with confluent never imports kafka-python (a fifth of a second
of every stream's start).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from operator import methodcaller
from typing import Any

import numpy as np
import pyarrow as pa

from priority_kafka.confluent._login import LoginWatch
from priority_kafka.spark import columns as arrow
from priority_kafka.spark.client import new_confluent_consumer
from priority_kafka.spark.driver import KafkaDriver, concerning
from priority_kafka.spark.errors import KafkaCallError
from priority_kafka.spark.options import SourceOptions
from priority_kafka.spark.ranges import OffsetRange, PartitionOffsets, TopicPartitionKey

__all__ = ["ConfluentDriver", "ConfluentReader", "Driver", "Reader"]

log = logging.getLogger("priority_kafka.spark.range_reader")

# ListOffsets' special timestamps: librdkafka's offsets_for_times sends them as given and gets
# the log start / end back, one request per partition leader (get_watermark_offsets would make
# one round trip per partition).
_EARLIEST_TIMESTAMP = -2
_LATEST_TIMESTAMP = -1
# Calls wait in slices of this long, to look at librdkafka's error callback in between.
_SLICE_S = 1.0


class ConfluentDriver(KafkaDriver):
    """The driver's calls over confluent-kafka consumers (one, plus one per committed level)."""

    def __init__(self, options: SourceOptions) -> None:
        self._timeout = options.request_timeout_s
        self._metadata: Any = None
        self._login = LoginWatch(config={
            **options.confluent_params, "bootstrap.servers": options.bootstrap_servers})
        super().__init__(options)

    @staticmethod
    def _client_errors() -> tuple[type[BaseException], ...]:
        from confluent_kafka import KafkaException

        return (KafkaException,)

    def _open(self, group_id: str | None) -> Any:
        return new_confluent_consumer(
            self._options, group_id=group_id, error_cb=self._login.error_cb(),
            logger=self._login.logger,
        )

    def _bounded(self, call: Any) -> Any:
        """``call(timeout)``, retried in slices for up to the driver's timeout; a refused
        authentication (librdkafka's message names the mechanism, never the password), a
        cluster whose every bootstrap address refuses, and a TLS listener reached in plaintext
        raise at once instead of after the whole timeout."""
        from confluent_kafka import KafkaError, KafkaException

        deadline = time.monotonic() + self._timeout
        self._login.clear()
        while True:
            remaining = deadline - time.monotonic()
            try:
                return call(max(0.001, min(_SLICE_S, remaining)))
            except KafkaException as exc:
                self._consumer.poll(0)  # serves the error callback
                self._login.check()
                unanswered = exc.args[0].code() in (
                    KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN
                )
                if not unanswered or remaining <= _SLICE_S:
                    raise

    def _existing_topics(self) -> Iterable[str]:
        self._metadata = self._bounded(lambda timeout: self._consumer.list_topics(timeout=timeout))
        return (name for name, topic in self._metadata.topics.items() if topic.error is None)

    def _partitions_of(self, topic: str) -> Iterable[int]:
        return self._metadata.topics[topic].partitions.keys()

    def _earliest(self, partitions: list[TopicPartitionKey]) -> PartitionOffsets:
        return self._offsets(partitions, _EARLIEST_TIMESTAMP)

    def _latest(self, partitions: list[TopicPartitionKey]) -> PartitionOffsets:
        return self._offsets(partitions, _LATEST_TIMESTAMP)

    def _offsets(self, partitions: list[TopicPartitionKey], timestamp: int) -> PartitionOffsets:
        from confluent_kafka import KafkaException, TopicPartition

        if not partitions:
            return {}
        wanted = [TopicPartition(topic, partition, timestamp) for topic, partition in partitions]
        found = self._bounded(
            lambda timeout: self._consumer.offsets_for_times(wanted, timeout=timeout)
        )
        failed = [tp for tp in found if tp.error is not None]
        if failed:  # named here: the caller's message would list every partition asked for
            raise KafkaCallError(
                f"looking up offsets from {self._options.bootstrap_servers} failed"
                f"{concerning([(tp.topic, tp.partition) for tp in failed])}: "
                f"{failed[0].error.str()}"
            ) from KafkaException(failed[0].error)
        return {(tp.topic, tp.partition): tp.offset for tp in found}

    def _commit(self, committer: Any, offsets: Mapping[TopicPartitionKey, int]) -> None:
        from confluent_kafka import TopicPartition

        committer.commit(
            offsets=[TopicPartition(topic, partition, offset)
                     for (topic, partition), offset in offsets.items()],
            asynchronous=False,
        )


class ConfluentReader:
    """confluent-kafka: librdkafka fetches and decodes in C; errors arrive as messages."""

    offset: Callable[[Any], int] = methodcaller("offset")

    def __init__(self, options: SourceOptions, offset_range: OffsetRange) -> None:
        from confluent_kafka import Message
        from confluent_kafka import TopicPartition as ConfluentTopicPartition

        self._new_tp = ConfluentTopicPartition
        self._error, self._key, self._value, self._timestamp = (
            Message.error, Message.key, Message.value, Message.timestamp
        )
        self._consumer = new_confluent_consumer(options)
        self._topic, self._partition = offset_range.topic, offset_range.partition
        self._timeout_s = options.request_timeout_s
        self.seek(offset_range.start)

    def fetch(self, max_records: int, timeout_ms: int) -> arrow.Fetched:
        from confluent_kafka import KafkaError, KafkaException

        messages = self._consumer.consume(max_records, timeout_ms / 1000)
        # map() over the C method: no Python frame per message on the common, error-free path.
        if not any(map(self._error, messages)):
            return arrow.Fetched(messages)
        errors = [message for message in messages if message.error() is not None]
        position = None
        for message in errors:
            error = message.error()
            if error.code() == KafkaError._PARTITION_EOF:
                position = message.offset()
            elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                return arrow.Fetched([], out_of_range=True)
            elif error.fatal():
                raise KafkaException(error)
            else:  # librdkafka retries transient errors itself; the deadline bounds them
                log.debug("reading %s partition %s: %s", self._topic, self._partition, error)
        records = [message for message in messages if message.error() is None]
        # The end of the log often comes in the same batch as the last records; it is reported
        # once, so dropping it here left a range ending in a marker waiting for the timeout.
        return arrow.Fetched(records, position=position)

    def watermarks(self) -> tuple[int, int]:
        tp = self._new_tp(self._topic, self._partition)
        low, high = self._consumer.get_watermark_offsets(tp, timeout=self._timeout_s, cached=False)
        return low, high

    def seek(self, offset: int) -> None:
        # assign(), not seek(): seek() fails while the partition's fetcher is not started yet.
        self._consumer.assign([self._new_tp(self._topic, self._partition, offset)])

    def close(self) -> None:
        self._consumer.close()

    def to_arrow(
        self, records: Sequence[Any], offset_range: OffsetRange, schema: pa.Schema
    ) -> pa.RecordBatch:
        count = len(records)
        first = records[0].offset()
        if records[-1].offset() - first == count - 1:  # contiguous: no object per offset
            offsets = np.arange(first, first + count, dtype=np.int64)
        else:
            offsets = np.fromiter(map(self.offset, records), np.int64, count)
        # (type, ms) pairs, flattened into one (count, 2) array; map() calls the C accessors
        # directly, and fromiter() takes the ints without a list of tuples (3x faster than
        # np.array() of the list).
        stamps = np.fromiter(
            chain.from_iterable(map(self._timestamp, records)), np.int64, 2 * count
        ).reshape(count, 2)
        # confluent's types are 0 none, 1 create, 2 log append; Spark's -1, 0, 1 (Java's ids).
        types = stamps[:, 0].astype(np.int32) - 1
        columns: dict[str, Any] = {
            **arrow.constant_columns(count, offset_range),
            "key": arrow.binary_array(list(map(self._key, records))),
            "value": arrow.binary_array(list(map(self._value, records))),
            "offset": arrow.numpy_array(offsets, pa.int64()),
            "timestamp": arrow.timestamp_array(stamps[:, 1], schema.field("timestamp").type),
            "timestampType": arrow.numpy_array(types, pa.int32()),
        }
        if "headers" in schema.names:
            columns["headers"] = arrow.headers_column(record.headers() for record in records)
        return arrow.record_batch(columns, schema)


#: What :meth:`~priority_kafka.families.Family.spark` callers build.
Driver = ConfluentDriver
Reader = ConfluentReader
