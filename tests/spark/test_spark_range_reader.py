"""Tests for priority_kafka.spark.range_reader: one offset range read into Arrow, on the broker."""

from __future__ import annotations

import datetime as dt
import logging
import re
import time

import pyarrow as pa
import pytest

from priority_kafka.spark.errors import DataLossError
from priority_kafka.spark.options import parse_options
from priority_kafka.spark.range_reader import BATCH_ROWS, read_range
from priority_kafka.spark.ranges import OffsetRange
from priority_kafka.spark.schema import source_schema

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(params=["kafka-python", "confluent"])
def client(request):
    """Each test reads with both clients, the ``client`` option's explicit values."""
    return request.param


def options_for(bootstrap_servers, name, client="kafka-python", **extra):
    """Stream options for ``name`` read with ``client``, with the given extra (string) options."""
    return parse_options(
        {"kafka.bootstrap.servers": bootstrap_servers, "subscribe": name, "client": client,
         **{k.lower(): v for k, v in extra.items()}},
        streaming=True,
    )


def read_rows(options, offset_range, include_headers=True):
    """Everything read_range yields for ``offset_range``, as a list of row dicts."""
    batches = list(read_range(options, offset_range, source_schema(include_headers)))
    return pa.Table.from_batches(batches).to_pylist() if batches else []


def test_rows_equal_what_kafka_python_reads(
    bootstrap_servers, priority_topic, kafka_python_records, client
):
    """Every column of every record equals kafka-python's view of the same offsets."""
    name = priority_topic({2: 30})
    options = options_for(bootstrap_servers, name, client)
    rows = read_rows(options, OffsetRange(f"{name}-2", 0, 5, 25))
    assert rows == [
        {
            "key": r.key, "value": r.value, "topic": r.topic, "partition": r.partition,
            "offset": r.offset,
            "timestamp": dt.datetime.fromtimestamp(r.timestamp / 1000, tz=dt.UTC),
            "timestampType": r.timestamp_type,
            "headers": [{"key": k, "value": v} for k, v in r.headers] or None,
            "priority": 2,
        }
        for r in kafka_python_records(f"{name}-2", 0, 5, 25)
    ]
    assert [row["offset"] for row in rows] == list(range(5, 25))


def test_large_ranges_come_in_bounded_arrow_batches(bootstrap_servers, priority_topic, client):
    """A range longer than one batch is split into batches of at most BATCH_ROWS rows."""
    count = BATCH_ROWS + 100
    name = priority_topic({1: count})
    options = options_for(bootstrap_servers, name, client)
    batches = list(read_range(options, OffsetRange(f"{name}-1", 0, 0, count), source_schema(False)))
    assert [b.num_rows for b in batches] == [BATCH_ROWS, 100]
    assert batches[0].schema.names[-1] == "priority"
    offsets = pa.Table.from_batches(batches).column("offset").to_pylist()
    assert offsets == list(range(count))


def test_deleted_records_fail_the_read_naming_the_offsets(
    bootstrap_servers, priority_topic, delete_records, client
):
    """With failOnDataLoss, reading offsets removed by deleteRecords raises DataLossError."""
    name = priority_topic({0: 20})
    delete_records(f"{name}-0", 12)
    options = options_for(bootstrap_servers, name, client)
    expected = rf"Offsets \[0, 12\) of {name}-0 partition 0 .* the log now starts at offset 12"
    with pytest.raises(DataLossError, match=expected):
        read_rows(options, OffsetRange(f"{name}-0", 0, 0, 20))


def test_deleted_records_are_skipped_with_a_warning(
    bootstrap_servers, priority_topic, delete_records, caplog, client
):
    """Without failOnDataLoss, the lost offsets are skipped, logged, and the rest is read."""
    name = priority_topic({0: 20})
    delete_records(f"{name}-0", 12)
    options = options_for(bootstrap_servers, name, client, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="priority_kafka.spark.range_reader"):
        rows = read_rows(options, OffsetRange(f"{name}-0", 0, 0, 20))
    assert [row["offset"] for row in rows] == list(range(12, 20))
    assert f"Offsets [0, 12) of {name}-0 partition 0" in caplog.text


def test_a_range_past_the_log_end_never_hangs(bootstrap_servers, priority_topic, client):
    """Offsets the log never reaches are reported after kafkaConsumer.pollTimeoutMs."""
    name = priority_topic({2: 5})
    options = options_for(bootstrap_servers, name, client,
                          **{"kafkaConsumer.pollTimeoutMs": "500"})
    started = time.monotonic()
    with pytest.raises(DataLossError, match=r"Offsets \[5, 9\) .* the log now ends at offset 5"):
        read_rows(options, OffsetRange(f"{name}-2", 0, 0, 9))
    assert time.monotonic() - started < 20



class FakeConsumer:
    """A kafka-python stand-in serving one partition's records, offsets as given."""

    def __init__(self, offsets, batch=3):
        self.offsets = list(offsets)
        self.batch = batch
        self.next = 0
        self.closed = False

    def assign(self, partitions):
        (self.tp,) = partitions

    def seek(self, tp, offset):
        self.next = offset

    def poll(self, timeout_ms=0, max_records=None):
        ready = [o for o in self.offsets if o >= self.next][: min(self.batch, max_records)]
        if not ready:
            return {}
        self.next = ready[-1] + 1
        return {self.tp: [FakeRecord(offset) for offset in ready]}

    def position(self, tp):
        return self.next

    def end_offsets(self, partitions):
        return {tp: self.offsets[-1] + 1 for tp in partitions}

    def beginning_offsets(self, partitions):
        return {tp: self.offsets[0] for tp in partitions}

    def close(self):
        self.closed = True


class FakeRecord:
    """The attributes of a kafka-python ConsumerRecord that the reader uses."""

    def __init__(self, offset):
        self.offset = offset
        self.key = self.value = str(offset).encode()
        self.timestamp, self.timestamp_type, self.headers = 1_000, 0, []


class FakeConfluentConsumer(FakeConsumer):
    """A confluent-kafka Consumer stand-in: Messages, and an end-of-partition event."""

    def assign(self, partitions):
        (self.tp,) = partitions
        self.next = self.tp.offset
        self.eof_sent = False

    def consume(self, num_messages=1, timeout=-1):
        from confluent_kafka import KafkaError, Message

        ready = [o for o in self.offsets if o >= self.next][: min(self.batch, num_messages)]
        if ready:
            self.next = ready[-1] + 1
        messages = [
            Message(topic=self.tp.topic, partition=0, offset=offset, key=str(offset).encode(),
                    value=str(offset).encode(), timestamp=(1, 1_000))
            for offset in ready
        ]
        if self.next > self.offsets[-1] and not self.eof_sent:  # librdkafka reports it once
            self.eof_sent = True
            messages.append(Message(topic=self.tp.topic, partition=0, offset=self.next,
                                    error=KafkaError(KafkaError._PARTITION_EOF)))
        return messages

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return self.offsets[0], self.offsets[-1] + 1


@pytest.fixture
def fake_consumer(monkeypatch, client):
    """Make read_range (with ``client``) use a fake consumer over the given offsets."""

    def install(offsets):
        if client == "confluent":
            consumer = FakeConfluentConsumer(offsets)
            target = "new_confluent_consumer"
        else:
            consumer = FakeConsumer(offsets)
            target = "new_consumer"
        monkeypatch.setattr(
            f"priority_kafka.spark.range_reader.{target}", lambda *a, **k: consumer
        )
        return consumer

    return install


@pytest.mark.parametrize(
    ("offsets", "lost"),
    [([0, 1, 2, 5, 6], "[3, 5)"), ([0, 1, 9], "[2, 7)")],
    ids=["gap-inside", "gap-at-the-end"],
)
def test_missing_offsets_inside_the_log_are_data_loss(fake_consumer, client, offsets, lost):
    """Offsets the log skips (compaction) fail the read with failOnDataLoss, naming them."""
    consumer = fake_consumer(offsets)
    options = options_for("127.0.0.1:1", "t", client)
    with pytest.raises(DataLossError, match=re.escape(f"Offsets {lost} of t-1 partition 0")) as e:
        read_rows(options, OffsetRange("t-1", 0, 0, 7))
    assert consumer.closed
    # A transactional topic read as read_uncommitted looks the same: the fix is named.
    assert "kafka.isolation.level=read_committed" in str(e.value)


def test_records_without_headers_have_null_headers(fake_consumer, client):
    """headers is null, not an empty list, for a record without any: as Spark's own source."""
    fake_consumer([0, 1])
    rows = read_rows(options_for("127.0.0.1:1", "t", client), OffsetRange("t-1", 0, 0, 2))
    assert [row["headers"] for row in rows] == [None, None]


def test_missing_offsets_are_skipped_without_fail_on_data_loss(fake_consumer, client):
    """Without failOnDataLoss the records that exist are returned, in offset order."""
    fake_consumer([0, 1, 2, 5, 6, 8])
    options = options_for("127.0.0.1:1", "t", client, failOnDataLoss="false")
    rows = read_rows(options, OffsetRange("t-1", 0, 0, 7), include_headers=False)
    assert [row["offset"] for row in rows] == [0, 1, 2, 5, 6]


def test_read_committed_expects_hidden_offsets(fake_consumer, client):
    """With isolation.level=read_committed, gaps (markers, aborted records) are not loss."""
    fake_consumer([0, 2, 4, 6])
    options = options_for("127.0.0.1:1", "t", client,
                          **{"kafka.isolation.level": "read_committed"})
    rows = read_rows(options, OffsetRange("t-1", 0, 0, 7), include_headers=False)
    assert [row["offset"] for row in rows] == [0, 2, 4, 6]
