"""librdkafka's fetcher is woken after partitions are resumed (priority_kafka.confluent._waking),
against the real local broker: a resumed partition is fetched again at once, not up to a
second later."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import OFFSET_END, Producer, TopicPartition
from helpers import consumer

from priority_kafka.confluent import PriorityConsumer

pytestmark = pytest.mark.integration

LEVEL = 2


@contextmanager
def trickle(servers: str, topic: str) -> Iterator[None]:
    """A message to level 2's partition 0 every 5 ms, on a thread, from the first one
    delivered until the end."""
    stop, delivered = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def send() -> None:
        producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
        try:
            while not stop.wait(0.005):
                producer.produce(f"{topic}-{LEVEL}", b"x", partition=0,
                                 on_delivery=lambda error, _: error or delivered.set())
                producer.poll(0)
        except BaseException as exc:
            failures.append(exc)
        finally:
            producer.flush(10)

    thread = threading.Thread(target=send, name="trickle")
    thread.start()
    try:
        assert delivered.wait(30), f"nothing delivered in 30 s: {failures}"
        yield
    finally:
        stop.set()
        thread.join(30)
    assert not failures, failures


def next_message_after(c: PriorityConsumer, start: float, within_s: float = 10) -> float:
    """Seconds from ``start`` to the next message."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if any(message.error() is None for message in c.consume(100, 0.01)):
            return time.monotonic() - start
    raise AssertionError(f"no message within {within_s} s")


def test_a_level_resumed_after_all_its_partitions_were_paused_is_fetched_at_once(
    bootstrap_servers: str, topic: str,
) -> None:
    """With every partition of a level paused, librdkafka's broker thread sleeps up to a
    second and its resume does not wake it (without the wake: 0.64-0.65 s from resume() to
    the next message here): after resume() the next message comes at once."""
    with trickle(bootstrap_servers, topic):
        c = consumer(bootstrap_servers, "wake-resume")
        try:
            tp = TopicPartition(f"{topic}-{LEVEL}", 0)
            c.assign([TopicPartition(tp.topic, 0, OFFSET_END)])  # no committed offset to read
            next_message_after(c, time.monotonic(), within_s=30)
            gaps = []
            for _ in range(5):
                c.pause([tp])
                time.sleep(0.3)  # the broker thread goes to sleep: nothing to fetch
                c.consume(100, 0.05)  # nothing: the partition is paused
                c.resume([tp])
                gaps.append(next_message_after(c, time.monotonic()))
        finally:
            c.close()
    assert statistics.median(gaps) < 0.2, gaps
