"""Tests for priority_kafka.spark.client: how the source configures its Kafka consumers."""

from __future__ import annotations

import pytest

from priority_kafka.spark.client import new_confluent_consumer, new_consumer
from priority_kafka.spark.options import parse_options

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_kafka_options_override_defaults_but_not_the_fixed_settings(bootstrap_servers):
    """kafka.* options reach the consumer; it never joins a group, commits or resets offsets."""
    options = parse_options(
        {"kafka.bootstrap.servers": bootstrap_servers, "subscribe": "orders",
         "kafka.max.partition.fetch.bytes": "65536", "kafka.group.id": "pipeline"},
        streaming=True,
    )
    consumer = new_consumer(options)
    try:
        config = consumer.config
        assert config["max_partition_fetch_bytes"] == 65536
        assert (config["group_id"], config["enable_auto_commit"], config["auto_offset_reset"]) == (
            None, False, "none"
        )
    finally:
        consumer.close()


def test_reading_a_missing_topic_never_creates_it(bootstrap_servers, unique_name):
    """A metadata lookup of a topic that does not exist leaves it absent on the broker."""
    from kafka import TopicPartition

    missing = unique_name("absent")
    options = parse_options(
        {"kafka.bootstrap.servers": bootstrap_servers, "assign": f'{{"{missing}-0": [0]}}'},
        streaming=False,
    )
    consumer = new_consumer(options)
    try:
        # What a range read of an assigned partition does.
        tp = TopicPartition(f"{missing}-0", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        consumer.poll(timeout_ms=2000)
    finally:
        consumer.close()
    assert_absent(bootstrap_servers, f"{missing}-0")


def test_confluent_reads_never_create_a_missing_topic(bootstrap_servers, unique_name):
    """A confluent range read of a missing topic's partition leaves the topic absent."""
    from confluent_kafka import TopicPartition

    missing = unique_name("absent")
    options = parse_options(
        {"kafka.bootstrap.servers": bootstrap_servers, "assign": f'{{"{missing}-0": [0]}}',
         "client": "confluent", "kafka.max.partition.fetch.bytes": "65536"},
        streaming=False,
    )
    consumer = new_confluent_consumer(options)
    try:
        consumer.assign([TopicPartition(f"{missing}-0", 0, 0)])
        consumer.consume(10, 2.0)
    finally:
        consumer.close()
    assert_absent(bootstrap_servers, f"{missing}-0")


def assert_absent(bootstrap_servers, topic):
    """The broker has no topic ``topic``."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        assert topic not in admin.list_topics()
    finally:
        admin.close()
