"""Fixtures for the Spark data source tests. The SparkSession (local[2], ``spark``) is in
tests/conftest.py, shared with the fault suite's SASL test.

The JVM starts once; every test shares the session and stops whatever queries it starts. Topics
come from the session's real broker (``bootstrap_servers``) and get unique names per test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient

from priority_kafka.producer import PriorityProducer, create_priority_topics


def record_key(level: int, index: int) -> bytes:
    """The key of the ``index``-th record produced at ``level`` by ``priority_topic``."""
    return f"k{level}-{index}".encode()


@pytest.fixture
def send_records(bootstrap_servers: str) -> Callable[..., None]:
    """Send ``counts[level]`` records per level to a logical topic's priority topics.

    Record ``i`` at level ``p`` has key ``k<p>-<i>`` (:func:`record_key`), value ``v<p>-<i>``, one
    header ``n=<i>``, and goes to partition ``i % partitions``; ``i`` counts from ``first``.
    """

    def send(
        name: str, counts: Mapping[int, int], partitions: int = 1, first: int = 0
    ) -> None:
        with PriorityProducer(
            max_priority=3, bootstrap_servers=bootstrap_servers, linger_ms=5
        ) as producer:
            for level, count in counts.items():
                for i in range(first, first + count):
                    producer.send(
                        name, value=f"v{level}-{i}".encode(), key=record_key(level, i),
                        headers=[("n", str(i).encode())], partition=i % partitions,
                        priority=level,
                    )
            producer.flush()

    return send


@pytest.fixture
def priority_topic(
    bootstrap_servers: str, unique_name: Callable[[str], str], send_records: Callable[..., None]
) -> Callable[..., str]:
    """Make the three priority topics of a new logical topic, fill them, return its name.

    ``priority_topic({2: 10, 0: 5}, partitions=2)`` sends records as :func:`send_records` does.
    """

    def make(counts: Mapping[int, int], partitions: int = 1) -> str:
        name = unique_name("spark")
        create_priority_topics(bootstrap_servers, name, 3, num_partitions=partitions)
        send_records(name, counts, partitions)
        return name

    return make


@pytest.fixture
def kafka_python_records(bootstrap_servers: str) -> Callable[[str, int, int, int], list[Any]]:
    """Read offsets ``[start, end)`` of a partition with a plain kafka-python consumer."""

    def read(topic: str, partition: int, start: int, end: int) -> list[Any]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, start)
        records: list[Any] = []
        deadline = time.monotonic() + 30
        try:
            while len(records) < end - start and time.monotonic() < deadline:
                records += consumer.poll(timeout_ms=500).get(tp, [])
        finally:
            consumer.close()
        return records[: end - start]

    return read


@pytest.fixture
def delete_records(bootstrap_servers: str) -> Callable[[str, int], None]:
    """Delete the records of partition 0 of a topic below an offset (as retention would)."""

    def delete(topic: str, before: int) -> None:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
        try:
            admin.delete_records({TopicPartition(topic, 0): before})
        finally:
            admin.close()

    return delete
