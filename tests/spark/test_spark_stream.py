"""Tests for priority_kafka.spark.stream: admission per micro-batch, checkpoints, commits."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.conftest import over_families

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def stream_of(spark, bootstrap_servers, name, **options):
    """spark.readStream.format("priority_kafka") for ``name`` from earliest, with ``options``."""
    reader = (
        spark.readStream.format("priority_kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", name).option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@over_families("spark_reader", argname="client")
def test_batches_take_29_14_7_then_an_idle_level_lends_its_share(
    spark, bootstrap_servers, priority_topic, tmp_path, unique_name, client
):
    """With 50 per trigger each batch admits 29/14/7 while all levels have backlog, and once
    level 2 has been idle for a whole window (3 triggers here), level 1 bursts to 14 + 29;
    the driver's offsets and group commits on either client."""
    # Level 2 runs dry after two batches; level 1 has 5 x 14 + 43 records, level 0 6 x 7.
    name = priority_topic({2: 58, 1: 113, 0: 42})
    group = unique_name("pipeline")
    batches = []

    def count_levels(frame, batch_id):
        counts = {row["priority"]: row["count"] for row in frame.groupBy("priority").count()
                  .collect()}
        batches.append({level: counts.get(level, 0) for level in (2, 1, 0)})

    query = (
        stream_of(spark, bootstrap_servers, name, maxOffsetsPerTrigger="50",
                  historyWindowSize="3", maxoutThreshold="2", client=client,
                  **{"kafka.group.id": group})
        .writeStream.foreachBatch(count_levels).trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "checkpoint")).start()
    )
    try:
        assert query.awaitTermination(240), "the AvailableNow query did not finish"
    finally:
        query.stop()
    assert [b for b in batches if any(b.values())] == [
        {2: 29, 1: 14, 0: 7},
        {2: 29, 1: 14, 0: 7},
        # Level 2's window still holds a maxed-out trigger: nothing to lend yet.
        {2: 0, 1: 14, 0: 7},
        {2: 0, 1: 14, 0: 7},
        {2: 0, 1: 14, 0: 7},
        # Window [0, 0, 0]: level 2's 29 go to level 1, the highest eligible level.
        {2: 0, 1: 43, 0: 7},
    ]
    # Spark reports a batch done to the source when it plans the next one, so the group's
    # commits trail by one batch: they stand at the end of the fifth batch.
    for level in (2, 1, 0):
        consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=f"{group}-{level}")
        try:
            committed = consumer.committed(TopicPartition(f"{name}-{level}", 0))
        finally:
            consumer.close()
        assert committed == sum(b[level] for b in batches[:-1] if any(b.values()))


def test_stop_and_restart_deliver_every_record_exactly_once_to_parquet(
    spark, bootstrap_servers, priority_topic, send_records, tmp_path
):
    """A query stopped mid-stream and restarted from its checkpoint writes each record once."""
    name = priority_topic({2: 60, 1: 60, 0: 60}, partitions=2)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "parquet"

    def start(**trigger):
        return (
            stream_of(spark, bootstrap_servers, name, maxOffsetsPerTrigger="30")
            .writeStream.format("parquet").partitionBy("priority")
            .option("checkpointLocation", str(checkpoint)).option("path", str(output))
            .trigger(**trigger).start()
        )

    first = start(processingTime="0 seconds")
    try:
        deadline = time.monotonic() + 180
        while len(first.recentProgress) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(first.recentProgress) >= 2, "the first query made no progress"
    finally:
        first.stop()
    written_before_restart = spark.read.parquet(str(output)).count()
    send_records(name, {2: 15, 1: 15, 0: 15}, partitions=2, first=60)
    second = start(availableNow=True)
    try:
        assert second.awaitTermination(240), "the restarted query did not finish"
    finally:
        second.stop()
    rows = spark.read.parquet(str(output)).select("topic", "partition", "offset", "priority")
    keys = [(r.topic, r.partition, r.offset) for r in rows.collect()]
    assert 0 < written_before_restart < 225
    assert len(keys) == len(set(keys)) == 225
    assert {r.priority: r["count"] for r in rows.groupBy("priority").count().collect()} == {
        2: 75, 1: 75, 0: 75
    }
