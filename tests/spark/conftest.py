"""Fixtures for the Spark data source tests: one SparkSession (local[2]) for the whole session.

The JVM starts once; every test shares the session and stops whatever queries it starts. Topics
come from the session's real broker (``bootstrap_servers``) and get unique names per test.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping

import pytest

from priority_kafka.producer import PriorityProducer, create_priority_topics


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local[2] SparkSession with the ``priority_kafka`` format registered; stopped at the end."""
    from pyspark.sql import SparkSession

    from priority_kafka.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("priority-kafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        # The data source runs in Python workers: they must use this interpreter and venv.
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


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
