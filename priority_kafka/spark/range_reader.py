"""Read one offset range on a Spark executor with kafka-python and yield Arrow record batches.

Stateless: every call opens its own consumer (no group), assigns the one partition, seeks to the
range's start and closes the consumer when done or abandoned. Guarantees:

- every record with an offset in ``[start, end)`` that is still in the log is returned once, in
  offset order;
- offsets that can no longer be read (below the log start after retention or deleteRecords, gone
  with the topic, or missing because of compaction) raise :class:`DataLossError` naming the topic,
  partition and offsets when ``failOnDataLoss`` is true, and are skipped with a warning otherwise;
  with ``kafka.isolation.level=read_committed`` offsets hidden inside the log (aborted records,
  transaction markers) are expected and not reported;
- a read never hangs: when no record arrives for ``kafkaConsumer.pollTimeoutMs`` it raises
  :class:`ReadTimeoutError`, or reports data loss if the log no longer reaches the range.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from kafka import TopicPartition
from kafka.errors import OffsetOutOfRangeError
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from priority_kafka.spark.client import new_consumer
from priority_kafka.spark.errors import DataLossError, ReadTimeoutError
from priority_kafka.spark.options import SourceOptions
from priority_kafka.spark.ranges import OffsetRange

__all__ = ["read_range"]

log = logging.getLogger(__name__)

#: Rows per Arrow record batch handed to Spark.
BATCH_ROWS = 32_768
# Upper bound of one poll() wait, so deadlines are checked at least this often.
_POLL_SLICE_MS = 1_000
_MISSING = (
    "the log has no records at these offsets: compacted or deleted records, or, on a "
    "transactional topic, transaction markers and aborted records (read those with the "
    "option kafka.isolation.level=read_committed, which expects such gaps)"
)


def read_range(
    options: SourceOptions, offset_range: OffsetRange, schema: StructType
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``offset_range`` as Arrow batches in ``schema`` (the source schema)."""
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    consumer = new_consumer(options)
    try:
        tp = TopicPartition(offset_range.topic, offset_range.partition)
        consumer.assign([tp])
        consumer.seek(tp, offset_range.start)
        pending: list[Any] = []
        for records in _records(consumer, tp, offset_range, options):
            pending += records
            while len(pending) >= BATCH_ROWS:
                yield _to_arrow(pending[:BATCH_ROWS], offset_range, arrow_schema)
                del pending[:BATCH_ROWS]
        if pending:
            yield _to_arrow(pending, offset_range, arrow_schema)
    finally:
        consumer.close()


def _records(
    consumer: Any, tp: TopicPartition, offset_range: OffsetRange, options: SourceOptions
) -> Iterator[list[Any]]:
    """Yield lists of the range's records in offset order, handling lost offsets."""
    expected = offset_range.start
    timeout_s = options.poll_timeout_ms / 1000
    hidden_offsets_expected = options.kafka_params.get("isolation_level") == "read_committed"
    deadline = time.monotonic() + timeout_s
    while expected < offset_range.end:
        remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            # Never more than the range still needs: kafka-python decodes every record it
            # returns, and decoding dominates the cost of a read.
            polled = consumer.poll(
                timeout_ms=min(remaining_ms, _POLL_SLICE_MS),
                max_records=min(BATCH_ROWS, offset_range.end - expected),
            )
        except OffsetOutOfRangeError:
            expected = _after_out_of_range(consumer, tp, offset_range, expected, options)
            if expected < offset_range.end and time.monotonic() >= deadline:  # again and again
                _after_timeout(consumer, tp, offset_range, expected, options)
                return
            continue
        records = polled.get(tp, [])
        if records:
            deadline = time.monotonic() + timeout_s
            offsets = [record.offset for record in records]
            inside = bisect_left(offsets, offset_range.end)
            if inside:
                if not hidden_offsets_expected:
                    _check_contiguous(offsets[:inside], expected, offset_range, options)
                expected = offsets[inside - 1] + 1
                yield records[:inside]
            if inside < len(offsets):  # a record at or past the end: nothing more is coming
                if expected < offset_range.end and not hidden_offsets_expected:
                    _data_loss(offset_range, expected, offset_range.end, _MISSING, options)
                return
            continue
        position = consumer.position(tp)
        if position is not None and position > expected:
            # Offsets consumed without a record: control batches or compacted-away records.
            if not hidden_offsets_expected:
                _data_loss(offset_range, expected, min(position, offset_range.end), _MISSING,
                           options)
            expected = position
            continue
        if time.monotonic() >= deadline:
            _after_timeout(consumer, tp, offset_range, expected, options)
            return


def _check_contiguous(
    offsets: Sequence[int], expected: int, offset_range: OffsetRange, options: SourceOptions
) -> None:
    """Report every gap in ``offsets`` (which follow ``expected``) as data loss."""
    if offsets[0] == expected and offsets[-1] - offsets[0] == len(offsets) - 1:
        return  # the common case: no gap at all
    for offset in offsets:
        if offset > expected:
            _data_loss(offset_range, expected, offset, _MISSING, options)
        expected = offset + 1


def _after_out_of_range(
    consumer: Any, tp: TopicPartition, offset_range: OffsetRange, expected: int,
    options: SourceOptions,
) -> int:
    """Handle OffsetOutOfRange at ``expected``: report the lost offsets, return where to go on."""
    earliest = consumer.beginning_offsets([tp])[tp]
    latest = consumer.end_offsets([tp])[tp]
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
        consumer.seek(tp, resume)
    return resume


def _after_timeout(
    consumer: Any, tp: TopicPartition, offset_range: OffsetRange, expected: int,
    options: SourceOptions,
) -> None:
    """No record for the whole poll timeout: data loss if the log ends before the range."""
    latest = consumer.end_offsets([tp])[tp]
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


def _to_arrow(
    records: Sequence[Any], offset_range: OffsetRange, schema: pa.Schema
) -> pa.RecordBatch:
    """Build one record batch of ``records`` in the source's Arrow schema."""
    count = len(records)
    columns: dict[str, Any] = {
        "key": [record.key for record in records],
        "value": [record.value for record in records],
        "topic": pa.repeat(pa.scalar(offset_range.topic, pa.string()), count),
        "partition": pa.repeat(pa.scalar(offset_range.partition, pa.int32()), count),
        "offset": [record.offset for record in records],
        "timestamp": [record.timestamp * 1000 for record in records],  # ms -> Spark's us
        "timestampType": [record.timestamp_type for record in records],
        "priority": pa.repeat(pa.scalar(offset_range.priority, pa.int32()), count),
    }
    if "headers" in schema.names:
        # null, not [], for a record without headers: what Spark's own Kafka source returns.
        columns["headers"] = [
            [{"key": key, "value": value} for key, value in record.headers]
            if record.headers else None
            for record in records
        ]
    arrays = [
        column if isinstance(column := columns[field.name], pa.Array)
        else pa.array(column, type=field.type)
        for field in schema
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
