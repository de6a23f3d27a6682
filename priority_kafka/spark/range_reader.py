"""Read one offset range on a Spark executor and yield Arrow record batches.

Reads with the client family the ``client`` option names (its Spark adapter's ``Reader``, a
:class:`~priority_kafka.spark.columns.PartitionReader`), with the same guarantees on each.
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
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from priority_kafka._gc import gc_paused
from priority_kafka.families import family
from priority_kafka.spark.columns import PartitionReader
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


def read_range(
    options: SourceOptions, offset_range: OffsetRange, schema: StructType
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``offset_range`` as Arrow batches in ``schema`` (the source schema)."""
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    reader: PartitionReader = family(options.client).spark().Reader(options, offset_range)
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
    reader: PartitionReader, offset_range: OffsetRange, options: SourceOptions,
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
    reader: PartitionReader, offset_range: OffsetRange, options: SourceOptions
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
    reader: PartitionReader, offset_range: OffsetRange, expected: int, options: SourceOptions
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
    reader: PartitionReader, offset_range: OffsetRange, expected: int, options: SourceOptions
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
