"""The benchmarks' raw kafka-python baselines: not left without partitions by a forgotten
rejoin (priority_kafka.kafka_python._kafka.FORGETS_PENDING_JOIN), and a stalled one says so."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from kafka.future import Future

from benchmarks._common import create_topics
from benchmarks._consumers import raw_consumer
from benchmarks._executor import plain_loop_rate
from priority_kafka.kafka_python._kafka import FORGETS_PENDING_JOIN

pytestmark = pytest.mark.integration


def test_a_raw_consumer_flags_a_forgotten_rejoin_at_its_next_poll(
    bootstrap_servers: str, unique_name: Callable[[str], str],
) -> None:
    """The state kafka-python 3.0.12 can leave a member in (a join task no poll awaits again,
    no rejoin flag) is flagged by the raw consumer's own next poll, as a PriorityConsumer
    level flags it. Without that, the executor benchmarks' plain loop sat with no partitions
    for ever: test_executor_seed_smoke's timeouts."""
    topic = unique_name("raw")
    create_topics(bootstrap_servers, [topic])
    consumer = raw_consumer(bootstrap_servers, [topic])
    coordinator = consumer._coordinator
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the raw consumer got no partition in 30 s"
            consumer.poll(timeout_ms=100)
        coordinator._join_task = Future()
        coordinator.rejoin_needed = False
        consumer.poll(timeout_ms=0)
        assert coordinator.rejoin_needed is FORGETS_PENDING_JOIN
    finally:
        coordinator._join_task = None
        consumer.close()


def test_a_plain_loop_that_gets_no_record_says_so_instead_of_waiting_for_ever(
    bootstrap_servers: str, unique_name: Callable[[str], str],
) -> None:
    """The executor benchmarks' plain loop on an empty topic raises once ``stall_s`` passed
    without a record, naming the topic, its progress and its assignment."""
    topic = unique_name("empty")
    create_topics(bootstrap_servers, [topic])
    started = time.monotonic()
    # The assignment may still be empty on a loaded machine: only its place is checked.
    with pytest.raises(TimeoutError,
                       match=rf"no record of '{topic}' for 2 s, 0 of 5 handled \(assigned \["):
        plain_loop_rate(bootstrap_servers, topic, 5, lambda _: None, stall_s=2)
    assert time.monotonic() - started < 30
