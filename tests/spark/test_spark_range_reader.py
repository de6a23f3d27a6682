"""Tests for priority_kafka.spark.range_reader: one offset range read into Arrow, on the broker."""

from __future__ import annotations

import datetime as dt
import logging
import time

import pyarrow as pa
import pytest

from priority_kafka.spark.errors import DataLossError
from priority_kafka.spark.options import parse_options
from priority_kafka.spark.range_reader import BATCH_ROWS, read_range
from priority_kafka.spark.ranges import OffsetRange
from priority_kafka.spark.schema import source_schema

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def options_for(bootstrap_servers, name, **extra):
    """Stream options for ``name`` with the given extra (string) options."""
    return parse_options(
        {"kafka.bootstrap.servers": bootstrap_servers, "subscribe": name,
         **{k.lower(): v for k, v in extra.items()}},
        streaming=True,
    )


def read_rows(options, offset_range, include_headers=True):
    """Everything read_range yields for ``offset_range``, as a list of row dicts."""
    batches = list(read_range(options, offset_range, source_schema(include_headers)))
    return pa.Table.from_batches(batches).to_pylist() if batches else []


def test_rows_equal_what_kafka_python_reads(
    bootstrap_servers, priority_topic, kafka_python_records
):
    """Every column of every record equals kafka-python's view of the same offsets."""
    name = priority_topic({2: 30})
    options = options_for(bootstrap_servers, name)
    rows = read_rows(options, OffsetRange(f"{name}-2", 0, 5, 25))
    assert rows == [
        {
            "key": r.key, "value": r.value, "topic": r.topic, "partition": r.partition,
            "offset": r.offset,
            "timestamp": dt.datetime.fromtimestamp(r.timestamp / 1000, tz=dt.UTC),
            "timestampType": r.timestamp_type,
            "headers": [{"key": k, "value": v} for k, v in r.headers],
            "priority": 2,
        }
        for r in kafka_python_records(f"{name}-2", 0, 5, 25)
    ]
    assert [row["offset"] for row in rows] == list(range(5, 25))


def test_large_ranges_come_in_bounded_arrow_batches(bootstrap_servers, priority_topic):
    """A range longer than one batch is split into batches of at most BATCH_ROWS rows."""
    count = BATCH_ROWS + 100
    name = priority_topic({1: count})
    options = options_for(bootstrap_servers, name)
    batches = list(read_range(options, OffsetRange(f"{name}-1", 0, 0, count), source_schema(False)))
    assert [b.num_rows for b in batches] == [BATCH_ROWS, 100]
    assert batches[0].schema.names[-1] == "priority"


def test_deleted_records_fail_the_read_naming_the_offsets(
    bootstrap_servers, priority_topic, delete_records
):
    """With failOnDataLoss, reading offsets removed by deleteRecords raises DataLossError."""
    name = priority_topic({0: 20})
    delete_records(f"{name}-0", 12)
    options = options_for(bootstrap_servers, name)
    expected = rf"Offsets \[0, 12\) of {name}-0 partition 0 .* the log now starts at offset 12"
    with pytest.raises(DataLossError, match=expected):
        read_rows(options, OffsetRange(f"{name}-0", 0, 0, 20))


def test_deleted_records_are_skipped_with_a_warning(
    bootstrap_servers, priority_topic, delete_records, caplog
):
    """Without failOnDataLoss, the lost offsets are skipped, logged, and the rest is read."""
    name = priority_topic({0: 20})
    delete_records(f"{name}-0", 12)
    options = options_for(bootstrap_servers, name, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="priority_kafka.spark.range_reader"):
        rows = read_rows(options, OffsetRange(f"{name}-0", 0, 0, 20))
    assert [row["offset"] for row in rows] == list(range(12, 20))
    assert f"Offsets [0, 12) of {name}-0 partition 0" in caplog.text


def test_a_range_past_the_log_end_never_hangs(bootstrap_servers, priority_topic):
    """Offsets the log never reaches are reported after kafkaConsumer.pollTimeoutMs."""
    name = priority_topic({2: 5})
    options = options_for(bootstrap_servers, name, **{"kafkaConsumer.pollTimeoutMs": "500"})
    started = time.monotonic()
    with pytest.raises(DataLossError, match=r"Offsets \[5, 9\) .* the log now ends at offset 5"):
        read_rows(options, OffsetRange(f"{name}-2", 0, 0, 9))
    assert time.monotonic() - started < 20

