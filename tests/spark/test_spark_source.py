"""Tests for priority_kafka.spark.source: the schema and option checks at DataFrame definition."""

from __future__ import annotations

import uuid

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql.types import StructField, StructType

from priority_kafka.spark.schema import source_schema

pytestmark = [pytest.mark.spark, pytest.mark.integration]

SPARK_KAFKA_COLUMNS = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)


def test_schema_is_spark_kafka_schema_plus_priority(spark, bootstrap_servers):
    """Columns and types are Spark's Kafka source's, then headers (if asked) and priority."""
    reader = spark.read.format("priority_kafka").option(
        "kafka.bootstrap.servers", bootstrap_servers
    ).option("subscribe", "orders")
    plain = reader.load().schema
    with_headers = reader.option("includeHeaders", "true").load().schema
    assert plain == StructType.fromDDL(SPARK_KAFKA_COLUMNS + ", priority int")
    assert with_headers == StructType.fromDDL(
        SPARK_KAFKA_COLUMNS + ", headers array<struct<key:string,value:binary>>, priority int"
    )


@pytest.mark.parametrize(
    ("streaming", "options", "message"),
    [
        (False, {"subscribe": "orders"}, "'kafka.bootstrap.servers' is required"),
        (True, {"kafka.bootstrap.servers": "SERVERS"}, "Exactly one of the options 'subscribe'"),
        (False, {"kafka.bootstrap.servers": "SERVERS", "subscribe": "orders",
                 "startingOffsets": '{"orders-2": {"0": 5}'},
         "'startingOffsets' is not valid JSON"),
        (True, {"kafka.bootstrap.servers": "SERVERS", "subscribe": "orders",
                "maxOffsetsPerTrigger": "-50"},
         "'maxOffsetsPerTrigger' must be at least 1 (got -50)"),
        (False, {"kafka.bootstrap.servers": "SERVERS", "subscribe": "orders",
                 "minPartitions": "-1"}, "'minPartitions' must be at least 1 (got -1)"),
    ],
    ids=["no-servers", "no-topic", "bad-json", "negative-limit", "negative-partitions"],
)
def test_bad_options_fail_at_load_before_any_job(
    spark, bootstrap_servers, streaming, options, message
):
    """load() raises naming the bad option, and Spark has run no job for it."""
    group = f"bad-options-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(group, "bad options")
    reader = spark.readStream if streaming else spark.read
    reader = reader.format("priority_kafka")
    for key, value in options.items():
        reader = reader.option(key, value.replace("SERVERS", bootstrap_servers))
    with pytest.raises(AnalysisException, match="ConfigError") as caught:
        reader.load()
    assert message in str(caught.value)
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == []


def test_mode_specific_options_fail_when_the_read_is_planned(spark, bootstrap_servers):
    """endingOffsets on a stream fails at start(), before any batch runs."""
    stream = (
        spark.readStream.format("priority_kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", "orders").option("endingOffsets", "latest").load()
    )
    with pytest.raises(Exception, match="'endingOffsets' is for batch reads only"):
        stream.writeStream.format("noop").start().awaitTermination(60)


def test_a_user_schema_is_rejected(spark, bootstrap_servers):
    """The schema is fixed, as for Spark's Kafka source."""
    schema = StructType([StructField("value", source_schema(False)["value"].dataType)])
    frame = (
        spark.read.format("priority_kafka").schema(schema)
        .option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", "orders").load()
    )
    with pytest.raises(Exception, match="fixed schema"):
        frame.collect()
