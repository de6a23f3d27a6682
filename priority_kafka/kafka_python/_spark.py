"""The Spark source on kafka-python: the driver's metadata, offset and commit calls
(:class:`KafkaPythonDriver`) and an executor's range reader (:class:`KafkaPythonReader`).

The registry finds this module through :meth:`priority_kafka.families.Family.spark` (``Driver``
and ``Reader``); only a source whose ``client`` option is kafka-python imports it, so a Spark
process reading with confluent never loads kafka-python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any

import numpy as np
import pyarrow as pa

from priority_kafka.spark import columns as arrow
from priority_kafka.spark.client import new_consumer
from priority_kafka.spark.driver import KafkaDriver
from priority_kafka.spark.options import SourceOptions
from priority_kafka.spark.ranges import OffsetRange, PartitionOffsets, TopicPartitionKey

__all__ = ["Driver", "KafkaPythonDriver", "KafkaPythonReader", "Reader"]


class KafkaPythonDriver(KafkaDriver):
    """The driver's calls over kafka-python consumers (one, plus one per committed level)."""

    @staticmethod
    def _client_errors() -> tuple[type[BaseException], ...]:
        from kafka.errors import KafkaError

        return (KafkaError,)

    def _open(self, group_id: str | None) -> Any:
        # The one request timeout bounds the first connection too (kafka-python's own
        # bootstrap_timeout_ms is 30 s whatever the request timeout), unless it is given.
        bootstrap = {} if "bootstrap_timeout_ms" in self._options.kafka_params else {
            "bootstrap_timeout_ms": int(self._options.request_timeout_s * 1000)}
        return new_consumer(self._options, group_id=group_id, **bootstrap)

    def _existing_topics(self) -> Iterable[str]:
        return self._consumer.topics()

    def _partitions_of(self, topic: str) -> Iterable[int]:
        return self._consumer.partitions_for_topic(topic) or ()

    def _earliest(self, partitions: list[TopicPartitionKey]) -> PartitionOffsets:
        from kafka import TopicPartition

        tps = [TopicPartition(*key) for key in partitions]
        found = self._consumer.beginning_offsets(tps) if tps else {}
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def _latest(self, partitions: list[TopicPartitionKey]) -> PartitionOffsets:
        from kafka import TopicPartition

        tps = [TopicPartition(*key) for key in partitions]
        found = self._consumer.end_offsets(tps) if tps else {}
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def _commit(self, committer: Any, offsets: Mapping[TopicPartitionKey, int]) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        committer.commit(
            {TopicPartition(*key): OffsetAndMetadata(offset, "", -1)
             for key, offset in offsets.items()}
        )


_timestamp_of = attrgetter("timestamp")
_timestamp_type_of = attrgetter("timestamp_type")


class KafkaPythonReader:
    """kafka-python: poll() decodes records in Python; OffsetOutOfRangeError when lost."""

    offset: Callable[[Any], int] = attrgetter("offset")

    def __init__(self, options: SourceOptions, offset_range: OffsetRange) -> None:
        # kafka-python is imported by the readers that use it only (see client.py).
        from kafka import TopicPartition
        from kafka.errors import OffsetOutOfRangeError

        self._out_of_range = OffsetOutOfRangeError
        self._consumer = new_consumer(options)
        self._tp = TopicPartition(offset_range.topic, offset_range.partition)
        self._consumer.assign([self._tp])
        self._consumer.seek(self._tp, offset_range.start)

    def fetch(self, max_records: int, timeout_ms: int) -> arrow.Fetched:
        try:
            polled = self._consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        except self._out_of_range:
            return arrow.Fetched([], out_of_range=True)
        records = polled.get(self._tp, [])
        if records:
            return arrow.Fetched(records)
        # Without records poll() may still have moved past a marker or an aborted batch.
        return arrow.Fetched([], position=self._consumer.position(self._tp))

    def watermarks(self) -> tuple[int, int]:
        tps = [self._tp]
        return (self._consumer.beginning_offsets(tps)[self._tp],
                self._consumer.end_offsets(tps)[self._tp])

    def seek(self, offset: int) -> None:
        self._consumer.seek(self._tp, offset)

    def close(self) -> None:
        self._consumer.close()

    def to_arrow(
        self, records: Sequence[Any], offset_range: OffsetRange, schema: pa.Schema
    ) -> pa.RecordBatch:
        count = len(records)
        columns: dict[str, Any] = {
            **arrow.constant_columns(count, offset_range),
            "key": arrow.binary_array([record.key for record in records]),
            "value": arrow.binary_array([record.value for record in records]),
            "offset": arrow.numpy_array(
                np.fromiter(map(self.offset, records), np.int64, count), pa.int64()
            ),
            "timestamp": arrow.timestamp_array(  # ms -> Spark's us
                np.fromiter(map(_timestamp_of, records), np.int64, count),
                schema.field("timestamp").type,
            ),
            "timestampType": arrow.numpy_array(
                np.fromiter(map(_timestamp_type_of, records), np.int32, count), pa.int32()
            ),
        }
        if "headers" in schema.names:
            columns["headers"] = arrow.headers_column(record.headers for record in records)
        return arrow.record_batch(columns, schema)


#: What :meth:`~priority_kafka.families.Family.spark` callers build.
Driver = KafkaPythonDriver
Reader = KafkaPythonReader
