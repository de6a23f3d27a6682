"""Fixtures for the Spark data source tests. The SparkSession (local[2], ``spark``) is in
tests/conftest.py, shared with the fault suite's SASL test.

The JVM starts once; every test shares the session and stops whatever queries it starts. Topics
come from the session's real broker (``bootstrap_servers``) and get unique names per test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
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


#: A written record of :func:`write_transactions`: where it landed, its value, and whether its
#: transaction committed (False: aborted, or still open).
TransactionalRecord = tuple[int, int, bytes, bool]


@pytest.fixture
def write_transactions(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> Iterator[Callable[..., list[TransactionalRecord]]]:
    """Write transactions with a transactional confluent-kafka producer, as Kafka Streams or an
    exactly-once pipeline would: the log gets a marker after each one and keeps aborted records.

    ``write(topic, plan, partitions=1, leave_open=False)`` writes one transaction per entry of
    ``plan`` (True commits, False aborts), ``3 + index`` records per partition each, then with
    ``leave_open`` one more that stays open until the test ends. Returns every record written as
    ``(partition, offset, value, committed)``, offsets from the broker's delivery reports.
    """
    from confluent_kafka import Producer

    producers: list[Any] = []
    open_transactions: list[Any] = []  # producers

    def write(
        topic: str, plan: Sequence[bool], partitions: int = 1, leave_open: bool = False
    ) -> list[TransactionalRecord]:
        producer = Producer({
            "bootstrap.servers": bootstrap_servers,
            "transactional.id": unique_name("tx"),
            "linger.ms": 5,
        })
        producers.append(producer)
        producer.init_transactions(30)
        where: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset)

        def delivered(error: Any, message: Any) -> None:
            assert error is None, error
            where[message.value()] = (message.partition(), message.offset())

        written: list[TransactionalRecord] = []
        for index, commit in enumerate([*plan, None] if leave_open else plan):
            values = [
                (partition, f"t{index}-p{partition}-{i}".encode())
                for partition in range(partitions) for i in range(3 + index)
            ]
            producer.begin_transaction()
            for partition, value in values:
                producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
            # Flushed first, so an aborted transaction leaves its records in the log (abort
            # alone would drop the ones still buffered) for read_uncommitted to return.
            assert producer.flush(30) == 0
            if commit:
                producer.commit_transaction(30)
            elif commit is not None:
                producer.abort_transaction(30)
            else:
                open_transactions.append(producer)
            written += [(*where[value], value, bool(commit)) for _, value in values]
        return sorted(written)

    yield write
    for producer in open_transactions:  # ended, so no later reader waits for it
        producer.abort_transaction(30)
    # The last references: librdkafka stops its threads now, not after the broker is gone.
    open_transactions.clear()
    producers.clear()
