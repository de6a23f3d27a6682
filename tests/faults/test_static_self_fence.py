"""Fault: the broker stops answering past a static level member's session (librdkafka issue
#3437). librdkafka rejoins with the level's ``group.instance.id`` as soon as the broker answers
again and the broker fences the member id it still holds: a fatal "fenced by other consumer
with same group.instance.id" with no other consumer. The confluent PriorityConsumer replaces
that level's consumer and goes on; a member fenced by a real other consumer still fails."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from priority_kafka import create_priority_topics
from priority_kafka.confluent import PriorityConsumer
from priority_kafka.testing import LocalKafkaBroker

pytestmark = [pytest.mark.faults, pytest.mark.integration]

LEVELS = 3
STATIC = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
          "auto.offset.reset": "earliest", "max.priority": LEVELS}


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalKafkaBroker]:
    """A broker of this module alone: it is frozen."""
    with LocalKafkaBroker() as started:
        yield started


def produce(bootstrap: str, topic: str, start: int, count: int = 20) -> set[str]:
    producer = Producer({"bootstrap.servers": bootstrap})
    values = set()
    for level in range(LEVELS):
        for i in range(start, start + count):
            producer.produce(f"{topic}-{level}", f"{level}:{i}".encode())
            values.add(f"{level}:{i}")
    assert producer.flush(30) == 0
    return values


#: Every error event consume() returned, with its time: what a failure has to show.
EVENTS: list[str] = []


def consume(consumer: PriorityConsumer) -> list[str]:
    values = []
    for m in consumer.consume(100, 0.2):
        if m.error():
            EVENTS.append(f"{time.strftime('%H:%M:%S')} {m.error()}")
        else:
            values.append(m.value().decode())
    return values


def read(consumer: PriorityConsumer, values: set[str], seen: set[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not values <= seen and time.monotonic() < deadline:
        seen.update(consume(consumer))
    assert values <= seen, (f"{len(values - seen)} not read ({sorted(values - seen)[:3]}...); "
                            f"the error events: {EVENTS[-20:]}")


def consume_for(consumer: PriorityConsumer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consume(consumer)


def test_a_level_fenced_by_its_own_rejoin_is_renewed(
    broker: LocalKafkaBroker, unique_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The broker frozen 8 s past the 6 s session: the levels' sessions time out, and a
    rejoin is fenced as the broker answers again (librdkafka's race: in trials, 1-3 of the 3
    levels in 6 of 7 freezes; frozen up to 4 times until one is). Each fenced level is
    replaced (a warning naming issue #3437), consume() raises nothing, every record is read.
    Without the renewal, consume() raised the fence."""
    bootstrap, topic = broker.bootstrap_servers, unique_name("self-fence")
    create_priority_topics(bootstrap, topic, LEVELS)
    sent = produce(bootstrap, topic, 0)
    consumer = PriorityConsumer({"bootstrap.servers": bootstrap, "group.id": unique_name("g"),
                                 "group.instance.id": unique_name("m"), **STATIC})
    seen: set[str] = set()

    def fences() -> list[str]:
        return [m for m in caplog.messages if m.startswith("FATAL") and "fenced" in m]

    try:
        consumer.subscribe([topic])
        read(consumer, sent, seen, 60)
        freezes = 0
        # DEBUG: a repeated librdkafka line (a second level's fence) is logged at DEBUG.
        with caplog.at_level(logging.DEBUG, logger="priority_kafka.librdkafka"):
            while not fences() and freezes < 4:
                freezes += 1
                consume_for(consumer, 5)  # the group settled (librdkafka: join-state steady)
                os.kill(broker.pid, signal.SIGSTOP)
                try:
                    consume_for(consumer, 8)
                finally:
                    os.kill(broker.pid, signal.SIGCONT)
                sent |= produce(bootstrap, topic, 20 * freezes)
                read(consumer, sent, seen, 60)
        renewed = [m for m in caplog.messages if "fenced by its own rejoin" in m]
        print(f"{freezes} freeze(s): {len(fences())} level(s) fenced themselves, "
              f"{len(renewed)} renewed")
        assert len(renewed) == len(fences())
        assert not renewed or "librdkafka issue #3437" in renewed[0]
    finally:
        consumer.close()


def test_a_level_fenced_by_another_consumer_still_fails(
    broker: LocalKafkaBroker, unique_name: Callable[[str], str],
) -> None:
    """A second consumer with the same group.instance.id fences the first one's levels
    (classic protocol: the member already in the group): that is no self-fence, and the first
    consumer's consume() raises it."""
    bootstrap, topic = broker.bootstrap_servers, unique_name("fence")
    create_priority_topics(bootstrap, topic, LEVELS)
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": unique_name("g"),
                              "group.instance.id": unique_name("m"), **STATIC}
    first, second = PriorityConsumer(config), PriorityConsumer(config)
    try:
        first.subscribe([topic])
        read(first, produce(bootstrap, topic, 0), set(), 60)
        second.subscribe([topic])
        deadline = time.monotonic() + 30
        with pytest.raises(KafkaException, match="fenced by other consumer"):
            while time.monotonic() < deadline:
                first.consume(100, 0.2)
                second.consume(100, 0.2)
    finally:
        first.close()
        second.close()
