"""Tests for priority_kafka.spark.range_reader: one offset range read into Arrow, on the broker."""

from __future__ import annotations

import datetime as dt
import logging
import time

import pyarrow as pa
import pytest

from priority_kafka.families import family as registered
from priority_kafka.spark.errors import DataLossError
from priority_kafka.spark.options import parse_options
from priority_kafka.spark.range_reader import BATCH_ROWS, read_range
from priority_kafka.spark.ranges import OffsetRange
from priority_kafka.spark.schema import source_schema
from tests.conftest import names_having

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(params=names_having("spark_reader"))
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



@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_transactional_topics_read_as_spark_reads_them(
    bootstrap_servers, priority_topic, write_transactions, client, isolation
):
    """On a topic transactional producers wrote, read_uncommitted returns every record, aborted
    ones included, and read_committed the committed ones; markers and aborted records are no
    data loss and never waited for, wherever a range starts or ends among them."""
    name = priority_topic({})
    written = write_transactions(f"{name}-1", [True, False, True, True, False, False, True])
    options = options_for(bootstrap_servers, name, client, **{"kafka.isolation.level": isolation})
    visible = [(o, v) for _, o, v, committed in written
               if committed or isolation == "read_uncommitted"]
    offsets = [o for _, o, _, _ in written]
    log_end = offsets[-1] + 2  # the last transaction's marker
    # The whole log (it ends in a marker); from the first marker to inside the last aborted
    # transaction (more hidden offsets, then records, follow the range); from offset 1 to just
    # past that transaction's marker.
    first_marker = next(o for o in range(log_end) if o not in offsets)
    last_aborted = max(o for _, o, _, committed in written if not committed)
    ranges = [(0, log_end), (first_marker, last_aborted), (1, last_aborted + 2)]
    started = time.monotonic()
    for start, end in ranges:
        rows = read_rows(options, OffsetRange(f"{name}-1", 0, start, end), include_headers=False)
        assert [(row["offset"], row["value"]) for row in rows] == [
            (o, v) for o, v in visible if start <= o < end
        ], (start, end)
    assert time.monotonic() - started < 10  # no range waited for a record that never comes


class FakeConsumer:
    """A kafka-python stand-in serving one partition's records, offsets as given."""

    def __init__(self, offsets, batch=3, log_end=None):
        self.offsets = list(offsets)
        self.batch = batch
        # Offsets from the last record up to here hold no record (transaction markers).
        self.log_end = self.offsets[-1] + 1 if log_end is None else log_end
        self.next = 0
        self.closed = False

    def assign(self, partitions):
        (self.tp,) = partitions

    def seek(self, tp, offset):
        self.next = offset

    def poll(self, timeout_ms=0, max_records=None):
        ready = [o for o in self.offsets if o >= self.next][: min(self.batch, max_records)]
        if not ready:  # kafka-python moves its position past markers at the end of the log
            self.next = max(self.next, self.log_end)
            return {}
        self.next = ready[-1] + 1
        return {self.tp: [FakeRecord(offset) for offset in ready]}

    def position(self, tp):
        return self.next

    def end_offsets(self, partitions):
        return {tp: self.log_end for tp in partitions}

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
        if self.next > self.offsets[-1] and not self.eof_sent:
            # librdkafka reports the end once, after the last records in the same batch, at
            # the log end (past any markers).
            self.eof_sent = True
            self.next = self.log_end
            messages.append(Message(topic=self.tp.topic, partition=0, offset=self.log_end,
                                    error=KafkaError(KafkaError._PARTITION_EOF)))
        return messages

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return self.offsets[0], self.log_end


@pytest.fixture
def fake_consumer(monkeypatch, client):
    """Make read_range (with ``client``) use a fake consumer over the given offsets."""

    def install(offsets, log_end=None):
        if registered(client).librdkafka:
            consumer = FakeConfluentConsumer(offsets, log_end=log_end)
            target = "new_confluent_consumer"
        else:
            consumer = FakeConsumer(offsets, log_end=log_end)
            target = "new_consumer"
        # The family's Spark adapter builds its consumer with the name it imported.
        monkeypatch.setattr(
            f"{registered(client).package}._spark.{target}", lambda *a, **k: consumer
        )
        return consumer

    return install


ISOLATION_LEVELS = ["read_uncommitted", "read_committed"]


@pytest.mark.parametrize("isolation", ISOLATION_LEVELS)
@pytest.mark.parametrize(
    ("offsets", "log_end"),
    [([0, 1, 2, 5, 6], 7), ([0, 1, 9], 10), ([0, 1, 2], 4)],
    ids=["gap-inside", "record-past-the-end", "log-ends-in-a-marker"],
)
def test_offsets_without_records_inside_the_log_are_skipped(
    fake_consumer, client, isolation, offsets, log_end
):
    """Offsets inside the log without a record (transaction markers, aborted or compacted
    records) are skipped without data loss in either isolation level, as Spark's own source
    does, and a range ending in such offsets ends at once instead of waiting for them."""
    consumer = fake_consumer(offsets, log_end=log_end)
    options = options_for("127.0.0.1:1", "t", client, **{
        "kafka.isolation.level": isolation, "kafkaConsumer.pollTimeoutMs": "5000",
    })
    end = min(7, log_end)
    started = time.monotonic()
    rows = read_rows(options, OffsetRange("t-1", 0, 0, end), include_headers=False)
    assert [row["offset"] for row in rows] == [o for o in offsets if o < end]
    assert time.monotonic() - started < 5  # never the poll timeout
    assert consumer.closed


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
