"""Tests for priority_kafka.spark.batch: spark.read over closed offset ranges."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from tests.conftest import over_families

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def batch_reader(spark, bootstrap_servers, name, **options):
    """spark.read.format("priority_kafka") for ``name`` with the given options."""
    reader = (
        spark.read.format("priority_kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", name)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@over_families("spark_reader", argname="client")
def test_a_closed_range_reads_exactly_what_kafka_python_reads(
    spark, bootstrap_servers, priority_topic, kafka_python_records, client
):
    """Per-partition JSON offsets select [start, end) and every value matches kafka-python,
    whichever client the executors read with."""
    name = priority_topic({2: 20, 1: 10, 0: 6}, partitions=2)
    starting = {f"{name}-2": {"0": 2, "1": -2}, f"{name}-0": {"1": 1}}
    ending = {f"{name}-2": {"0": 8}, f"{name}-1": {"1": 3}, f"{name}-0": {"0": -1}}
    frame = batch_reader(
        spark, bootstrap_servers, name, includeHeaders="true", client=client,
        startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending),
    ).withColumn("timestamp", F.unix_millis("timestamp"))
    rows = sorted(
        (r.topic, r.partition, r.offset, bytes(r.key), bytes(r.value), r.timestamp,
         r.timestampType, [(h.key, bytes(h.value)) for h in r.headers], r.priority)
        for r in frame.collect()
    )
    # Partitions the JSON leaves out start at earliest and end at latest.
    ranges = [(2, 0, 2, 8), (2, 1, 0, 10), (1, 0, 0, 5), (1, 1, 0, 3), (0, 0, 0, 3),
              (0, 1, 1, 3)]
    expected = sorted(
        (r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.timestamp_type,
         list(r.headers), level)
        for level, partition, start, end in ranges
        for r in kafka_python_records(f"{name}-{level}", partition, start, end)
    )
    assert rows == expected
    assert len(rows) == sum(end - start for _, _, start, end in ranges)


def test_min_partitions_splits_ranges_into_more_tasks(spark, bootstrap_servers, priority_topic):
    """minPartitions=4 cuts one 40-offset range into four tasks that still read all of it."""
    name = priority_topic({1: 40})
    frame = batch_reader(spark, bootstrap_servers, name, minPartitions="4")
    assert frame.rdd.getNumPartitions() == 4
    assert sorted(r.offset for r in frame.select("offset").collect()) == list(range(40))


def test_lost_records_fail_the_batch_with_fail_on_data_loss(
    spark, bootstrap_servers, priority_topic, delete_records
):
    """Reading deleted offsets fails the job with a DataLossError naming topic and offsets."""
    name = priority_topic({0: 20})
    starting = json.dumps({f"{name}-0": {"0": 0}})
    frame = batch_reader(spark, bootstrap_servers, name, startingOffsets=starting)
    delete_records(f"{name}-0", 12)
    with pytest.raises(Exception, match=rf"DataLossError: Offsets \[0, 12\) of {name}-0"):
        frame.collect()


def test_lost_records_are_skipped_without_fail_on_data_loss(
    spark, bootstrap_servers, priority_topic, delete_records
):
    """failOnDataLoss=false reads what is left of the range."""
    name = priority_topic({0: 20})
    delete_records(f"{name}-0", 12)
    starting = json.dumps({f"{name}-0": {"0": 0}})
    frame = batch_reader(
        spark, bootstrap_servers, name, startingOffsets=starting, failOnDataLoss="false"
    )
    assert sorted(r.offset for r in frame.select("offset").collect()) == list(range(12, 20))


def test_nothing_to_read_gives_an_empty_frame(spark, bootstrap_servers, priority_topic):
    """Empty topics (and levels whose topic does not exist) read as zero rows, no error."""
    name = priority_topic({})
    assert batch_reader(spark, bootstrap_servers, name).count() == 0
    assert batch_reader(spark, bootstrap_servers, name + "-missing").count() == 0


@over_families("spark_reader", argname="client")
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_transactional_topic_reads_as_spark_reads_it(
    spark, bootstrap_servers, priority_topic, write_transactions, client, isolation
):
    """A topic transactional producers write, one transaction still open, reads as Spark's own
    Kafka source reads it: read_uncommitted every record in the log, aborted and open ones
    included; read_committed the committed ones, up to the open transaction (the last stable
    offset)."""
    name = priority_topic({}, partitions=2)
    written = write_transactions(
        f"{name}-2", [True, False, True, False, True], partitions=2, leave_open=True
    )
    frame = batch_reader(
        spark, bootstrap_servers, name, client=client,
        **{"kafka.isolation.level": isolation},
    )
    rows = sorted((r.partition, r.offset, bytes(r.value)) for r in frame.collect())
    assert rows == [
        (partition, offset, value) for partition, offset, value, committed in written
        if committed or isolation == "read_uncommitted"
    ]
