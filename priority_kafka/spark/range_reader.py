"""Read one offset range on a Spark executor and yield Arrow record batches.

Reads with kafka-python or confluent-kafka (the ``client`` option), with the same guarantees.
Stateless: every call opens its own consumer (no group), assigns the one partition, seeks to the
range's start and closes the consumer when done or abandoned. Guarantees:

- every record with an offset in ``[start, end)`` that is still in the log is returned once, in
  offset order;
- offsets that can no longer be read (below the log start after retention or deleteRecords, past
  the end of a truncated or recreated log) raise :class:`DataLossError` naming the topic,
  partition and offsets when ``failOnDataLoss`` is true, and are skipped with a warning otherwise;
- offsets inside the log without a record to return (transaction markers, aborted records under
  ``kafka.isolation.level=read_committed``, records compaction removed) are skipped silently in
  either isolation level, as Spark's own Kafka source does: they are the log's normal shape on
  topics that transactional producers (Kafka Streams, Flink, exactly-once pipelines) or
  compaction wrote, not lost data;
- a read never hangs: when no record arrives for ``kafkaConsumer.pollTimeoutMs`` it raises
  :class:`ReadTimeoutError`, or reports data loss if the log no longer reaches the range.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from operator import attrgetter, methodcaller
from typing import Any, NamedTuple, Protocol

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from priority_kafka._gc import gc_paused
from priority_kafka.families import CONFLUENT, KAFKA_PYTHON, Family, family
from priority_kafka.spark.client import new_confluent_consumer, new_consumer
from priority_kafka.spark.errors import DataLossError, ReadTimeoutError
from priority_kafka.spark.options import SourceOptions
from priority_kafka.spark.ranges import OffsetRange

__all__ = ["read_range"]

log = logging.getLogger(__name__)

#: Rows per Arrow record batch handed to Spark.
BATCH_ROWS = 32_768
# Upper bound of one fetch's wait. Both clients wait out their whole timeout when fewer records
# than asked for arrive, which is how every range ending in a transaction marker ends; short
# slices keep that wait small (a whole 1 s slice cost each such range a second) and bound how
# often deadlines are checked.
_POLL_SLICE_MS = 100


class _Fetched(NamedTuple):
    """What one fetch of a partition gave."""

    #: The records, in offset order (the client's own record objects).
    records: list[Any]
    #: The fetch position was out of the log's range (retention, truncation).
    out_of_range: bool = False
    #: The offset reading has got to (past the records and any hidden offsets after them), if
    #: the client said so in this fetch.
    position: int | None = None


class _PartitionReader(Protocol):
    """One client's consumer of one partition, as the range loop needs it."""

    #: The offset of one of this client's records.
    offset: Callable[[Any], int]

    def fetch(self, max_records: int, timeout_ms: int) -> _Fetched:
        """Wait up to ``timeout_ms`` for at most ``max_records`` records."""

    def watermarks(self) -> tuple[int, int]:
        """The partition's first offset and the offset its next record will get."""

    def seek(self, offset: int) -> None:
        """Fetch from ``offset`` next."""

    def close(self) -> None:
        """Close the consumer."""

    def to_arrow(
        self, records: Sequence[Any], offset_range: OffsetRange, schema: pa.Schema
    ) -> pa.RecordBatch:
        """One record batch of ``records`` in the source's Arrow schema."""


def read_range(
    options: SourceOptions, offset_range: OffsetRange, schema: StructType
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``offset_range`` as Arrow batches in ``schema`` (the source schema)."""
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    readers: dict[Family, Callable[[SourceOptions, OffsetRange], _PartitionReader]] = {
        KAFKA_PYTHON: _KafkaPythonReader, CONFLUENT: _ConfluentReader,
    }
    reader = readers[family(options.client)](options, offset_range)
    try:
        batches = _arrow_batches(reader, offset_range, options, arrow_schema)
        while True:
            # Everything but the hand-over to Spark runs with the collector paused (a third
            # of a range read's CPU was collections scanning the batch being built).
            with gc_paused():
                batch = next(batches, None)
            if batch is None:
                return
            yield batch
    finally:
        reader.close()


def _arrow_batches(
    reader: _PartitionReader, offset_range: OffsetRange, options: SourceOptions,
    arrow_schema: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    """The range's records as Arrow batches of at most BATCH_ROWS rows."""
    pending: list[Any] = []
    for records in _records(reader, offset_range, options):
        pending += records
        while len(pending) >= BATCH_ROWS:
            batch = reader.to_arrow(pending[:BATCH_ROWS], offset_range, arrow_schema)
            # Freed before the collector resumes, so their allocations never trigger it.
            del pending[:BATCH_ROWS]
            yield batch
    if pending:
        yield reader.to_arrow(pending, offset_range, arrow_schema)


def _records(
    reader: _PartitionReader, offset_range: OffsetRange, options: SourceOptions
) -> Iterator[list[Any]]:
    """Yield lists of the range's records in offset order, handling lost offsets.

    Offsets the records skip, and offsets the client moved past without a record, are hidden
    offsets inside the log (markers, aborted or compacted records): skipped, never reported.
    """
    expected = offset_range.start
    timeout_s = options.poll_timeout_ms / 1000
    offset_of = reader.offset
    deadline = time.monotonic() + timeout_s
    while expected < offset_range.end:
        remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
        # Never more than the range still needs: kafka-python decodes every record it
        # returns, and decoding dominates the cost of a read.
        fetched = reader.fetch(
            min(BATCH_ROWS, offset_range.end - expected), min(remaining_ms, _POLL_SLICE_MS)
        )
        if fetched.out_of_range:
            expected = _after_out_of_range(reader, offset_range, expected, options)
            if expected < offset_range.end and time.monotonic() >= deadline:  # again and again
                _after_timeout(reader, offset_range, expected, options)
                return
            continue
        records = fetched.records
        if records:
            deadline = time.monotonic() + timeout_s
            last = offset_of(records[-1])
            if last < offset_range.end:  # the common case: all inside the range
                expected = last + 1
                yield records
            else:
                inside = bisect_left([offset_of(record) for record in records], offset_range.end)
                if inside:
                    yield records[:inside]
                return  # a record at or past the end: the rest of the range is hidden offsets
        position = fetched.position
        if position is not None and position > expected:
            # Offsets consumed without a record: markers, aborted or compacted-away records.
            expected = position
            deadline = time.monotonic() + timeout_s
            continue
        if time.monotonic() >= deadline:  # never right after records (they renew it)
            _after_timeout(reader, offset_range, expected, options)
            return


def _after_out_of_range(
    reader: _PartitionReader, offset_range: OffsetRange, expected: int, options: SourceOptions
) -> int:
    """Handle an out-of-range fetch at ``expected``: report lost offsets, return where to go on."""
    earliest, latest = reader.watermarks()
    if expected < earliest:
        resume = min(earliest, offset_range.end)
        _data_loss(offset_range, expected, resume,
                   f"the log now starts at offset {earliest} (retention or deleted records)",
                   options)
    elif expected >= latest:
        resume = offset_range.end
        _data_loss(offset_range, expected, resume,
                   f"the log now ends at offset {latest} (truncated or recreated topic)", options)
    else:
        resume = expected  # in range again (the log moved meanwhile): just fetch again
    if resume < offset_range.end:
        reader.seek(resume)
    return resume


def _after_timeout(
    reader: _PartitionReader, offset_range: OffsetRange, expected: int, options: SourceOptions
) -> None:
    """No record for the whole poll timeout: data loss if the log ends before the range."""
    latest = reader.watermarks()[1]
    if latest <= expected:
        _data_loss(offset_range, expected, offset_range.end,
                   f"the log now ends at offset {latest} (truncated or recreated topic)", options)
        return
    raise ReadTimeoutError(
        f"Reading {offset_range.topic} partition {offset_range.partition} offsets "
        f"[{offset_range.start}, {offset_range.end}) got no record at offset {expected} within "
        f"kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms} although the log ends at "
        f"{latest}; is the broker reachable?"
    )


def _data_loss(
    offset_range: OffsetRange, first: int, stop: int, reason: str, options: SourceOptions
) -> None:
    """Raise DataLossError for offsets ``[first, stop)``; without failOnDataLoss, warn."""
    message = (
        f"Offsets [{first}, {stop}) of {offset_range.topic} partition {offset_range.partition} "
        f"(batch range [{offset_range.start}, {offset_range.end})) can no longer be read: "
        f"{reason}."
    )
    if options.fail_on_data_loss:
        raise DataLossError(
            message + " Set the option failOnDataLoss to 'false' to skip lost records with a "
            "warning instead."
        )
    log.warning("%s Skipping them (failOnDataLoss is false).", message)


def _constant_columns(
    count: int, offset_range: OffsetRange
) -> dict[str, pa.Array]:
    """The columns every record of a range shares."""
    topic = offset_range.topic.encode()
    return {
        "topic": pa.Array.from_buffers(pa.string(), count, [
            None,
            pa.py_buffer(np.arange(0, (count + 1) * len(topic), len(topic), dtype=np.int32)),
            pa.py_buffer(topic * count),
        ]),
        "partition": _numpy_array(np.full(count, offset_range.partition, np.int32), pa.int32()),
        "priority": _numpy_array(np.full(count, offset_range.priority, np.int32), pa.int32()),
    }


# The columns are built from buffers, never with pa.array() or pa.scalar(): the first of those
# in a process imports pandas (pyarrow checks whether its argument is a pandas object), which
# cost each new Spark Python worker about 0.3 s of CPU before its first batch.


def _numpy_array(values: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    """A null-free Arrow array over ``values`` (contiguous, of ``arrow_type``'s width)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


def _binary_array(values: list[bytes | None]) -> pa.Array:
    """An Arrow ``binary`` array of ``values`` (None is null), the bytes copied once."""
    count = len(values)
    nulls = values.count(None)
    if nulls == count:
        return pa.nulls(count, pa.binary())
    validity = None
    present: list[bytes] = values  # type: ignore[assignment]  # no None once replaced below
    if nulls:
        valid = np.fromiter(map(_is_not_none, values), np.bool_, count)
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        present = [b"" if value is None else value for value in values]
    data = b"".join(present)
    if len(data) > _MAX_BINARY_BYTES:  # more than int32 offsets address: pyarrow's own way
        return pa.array(values, type=pa.binary())
    offsets = np.empty(count + 1, np.int32)
    offsets[0] = 0
    np.cumsum(np.fromiter(map(len, present), np.int32, count), out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), count, [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=nulls,
    )


#: The most bytes a ``binary`` array's int32 offsets address.
_MAX_BINARY_BYTES = 2**31 - 1


def _is_not_none(value: object) -> bool:
    return value is not None


def _timestamp_array(millis: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    """Spark's timestamp column (microseconds) from Kafka's milliseconds."""
    return _numpy_array(millis.astype(np.int64) * 1000, arrow_type)


def _record_batch(columns: dict[str, Any], schema: pa.Schema) -> pa.RecordBatch:
    """Arrange ``columns`` (Arrow arrays or Python lists) in ``schema``'s order and types."""
    arrays = [
        column if isinstance(column := columns[field.name], pa.Array)
        else pa.array(column, type=field.type)
        for field in schema
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_timestamp_of = attrgetter("timestamp")
_timestamp_type_of = attrgetter("timestamp_type")


class _KafkaPythonReader:
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

    def fetch(self, max_records: int, timeout_ms: int) -> _Fetched:
        try:
            polled = self._consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        except self._out_of_range:
            return _Fetched([], out_of_range=True)
        records = polled.get(self._tp, [])
        if records:
            return _Fetched(records)
        # Without records poll() may still have moved past a marker or an aborted batch.
        return _Fetched([], position=self._consumer.position(self._tp))

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
            **_constant_columns(count, offset_range),
            "key": _binary_array([record.key for record in records]),
            "value": _binary_array([record.value for record in records]),
            "offset": _numpy_array(
                np.fromiter(map(self.offset, records), np.int64, count), pa.int64()
            ),
            "timestamp": _timestamp_array(  # ms -> Spark's us
                np.fromiter(map(_timestamp_of, records), np.int64, count),
                schema.field("timestamp").type,
            ),
            "timestampType": _numpy_array(
                np.fromiter(map(_timestamp_type_of, records), np.int32, count), pa.int32()
            ),
        }
        if "headers" in schema.names:
            # null, not [], for a record without headers: what Spark's own Kafka source returns.
            columns["headers"] = [
                [{"key": key, "value": value} for key, value in record.headers]
                if record.headers else None
                for record in records
            ]
        return _record_batch(columns, schema)


class _ConfluentReader:
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

    def fetch(self, max_records: int, timeout_ms: int) -> _Fetched:
        from confluent_kafka import KafkaError, KafkaException

        messages = self._consumer.consume(max_records, timeout_ms / 1000)
        # map() over the C method: no Python frame per message on the common, error-free path.
        if not any(map(self._error, messages)):
            return _Fetched(messages)
        errors = [message for message in messages if message.error() is not None]
        position = None
        for message in errors:
            error = message.error()
            if error.code() == KafkaError._PARTITION_EOF:
                position = message.offset()
            elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                return _Fetched([], out_of_range=True)
            elif error.fatal():
                raise KafkaException(error)
            else:  # librdkafka retries transient errors itself; the deadline bounds them
                log.debug("reading %s partition %s: %s", self._topic, self._partition, error)
        records = [message for message in messages if message.error() is None]
        # The end of the log often comes in the same batch as the last records; it is reported
        # once, so dropping it here left a range ending in a marker waiting for the timeout.
        return _Fetched(records, position=position)

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
            **_constant_columns(count, offset_range),
            "key": _binary_array(list(map(self._key, records))),
            "value": _binary_array(list(map(self._value, records))),
            "offset": _numpy_array(offsets, pa.int64()),
            "timestamp": _timestamp_array(stamps[:, 1], schema.field("timestamp").type),
            "timestampType": _numpy_array(types, pa.int32()),
        }
        if "headers" in schema.names:
            headers = [record.headers() for record in records]
            # null, not [], for a record without headers: what Spark's own Kafka source returns.
            columns["headers"] = [
                [{"key": key, "value": value} for key, value in pairs] if pairs else None
                for pairs in headers
            ]
        return _record_batch(columns, schema)
