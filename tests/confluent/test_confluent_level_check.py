"""Levels are checked against the broker on confluent-kafka too (issue 37 items 1 and 7):
subscribe() names unread and missing level topics, the producer never creates a level topic,
and priority=None or a bad topics argument fail at the call naming them."""

from __future__ import annotations

import logging
import re
import time

import pytest
from confluent_kafka.admin import AdminClient
from helpers import consumer, counts

from priority_kafka import MissingTopicsError, create_priority_topics
from priority_kafka.confluent import PriorityConsumer, PriorityProducer
from priority_kafka.confluent._config import InvalidArgError

pytestmark = pytest.mark.integration


def _topics(servers: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": servers}).list_topics(timeout=10).topics)


def test_subscribe_names_the_unread_level(bootstrap_servers: str, unique_name) -> None:
    name = unique_name("orders")
    create_priority_topics(bootstrap_servers, name, 4)
    c = consumer(bootstrap_servers, unique_name("g"))
    try:
        started = time.monotonic()
        with pytest.raises(InvalidArgError) as caught:
            c.subscribe([name])
        assert time.monotonic() - started < 10
        assert str(caught.value.args[0].str()).startswith(
            f"{name}-3 exists but max.priority=3 reads only {name}-0..{name}-2"
        )
        with pytest.raises(InvalidArgError, match=f"{name}-3 matches pattern"):
            c.subscribe([f"^{name[:-2]}.*"])
    finally:
        c.close()


def test_subscribe_names_missing_levels_or_waits_with_a_warning(
    bootstrap_servers: str, unique_name, caplog: pytest.LogCaptureFixture
) -> None:
    name = unique_name("absent")
    c = consumer(bootstrap_servers, unique_name("g"))
    try:
        with pytest.raises(MissingTopicsError, match=f"topics {name}-0, {name}-1, {name}-2 do "
                           f"not exist; create them with `priority-kafka topics create {name}"):
            c.subscribe([name])
    finally:
        c.close()
    waiting = consumer(bootstrap_servers, unique_name("g"), **{"wait.for.topics": True})
    try:
        with caplog.at_level(logging.WARNING):
            waiting.subscribe([name])
        assert f"topics {name}-0" in caplog.text and "wait.for.topics" in caplog.text
        waiting.consume(10, 1.0)
    finally:
        waiting.close()
    assert not [t for t in _topics(bootstrap_servers) if t.startswith(name)]


def test_produce_never_creates_a_level_topic(bootstrap_servers: str, unique_name) -> None:
    name = unique_name("payments")
    create_priority_topics(bootstrap_servers, name, 3)
    producer = PriorityProducer({"bootstrap.servers": bootstrap_servers, "max.priority": 5})
    producer.produce(name, b"ok", priority=2)
    with pytest.raises(MissingTopicsError) as caught:
        producer.produce(name, b"lost", priority=4)
    assert str(caught.value).startswith(
        f"{name}-4 does not exist ('{name}' has levels {name}-0..{name}-2 on the broker)"
    )
    with pytest.raises(InvalidArgError, match=r"'priority' must be an integer .*\(got None\)"):
        producer.produce(name, b"x", priority=None)
    producer.produce(name, b"default")  # omitted: default.priority
    assert producer.flush(30) == 0
    assert f"{name}-4" not in _topics(bootstrap_servers)


def test_subscribe_names_a_bad_topics_argument(bootstrap_servers: str, unique_name) -> None:
    c = consumer(bootstrap_servers, unique_name("g"))
    try:
        for bad in ("orders", 5, ["orders", 7]):
            with pytest.raises(TypeError, match=r"'topics' must be a list of topic names "
                               rf"\(got {re.escape(repr(bad))}"):
                c.subscribe(bad)
    finally:
        c.close()


def test_a_distributor_of_the_wrong_signature_fails_at_construction(bootstrap_servers) -> None:
    def one_argument(max_priority):
        return {}

    with pytest.raises(InvalidArgError, match=r"'max\.poll\.records\.distributor' must take two "
                       "arguments"):
        consumer(bootstrap_servers, "g", **{"max.poll.records.distributor": one_argument})


def test_for_topics_takes_the_levels_from_the_broker(bootstrap_servers: str, unique_name) -> None:
    """Without max.priority, for_topics() reads every level the topic has: all four."""
    name = unique_name("orders")
    create_priority_topics(bootstrap_servers, name, 4)
    producer = PriorityProducer({"bootstrap.servers": bootstrap_servers, "max.priority": 4})
    for level in range(4):
        for i in range(25):
            producer.produce(name, f"{level}:{i}".encode(), priority=level)
    assert producer.flush(30) == 0
    c = PriorityConsumer.for_topics({"bootstrap.servers": bootstrap_servers,
                                     "group.id": unique_name("g"),
                                     "auto.offset.reset": "earliest"}, [name])
    try:
        assert c.max_priority == 4
        seen: list = []
        deadline = time.monotonic() + 60
        while len(seen) < 100 and time.monotonic() < deadline:
            seen += c.consume(100, 0.5)
        assert counts(seen) == {0: 25, 1: 25, 2: 25, 3: 25}
    finally:
        c.close()
    with pytest.raises(MissingTopicsError, match="has no priority topics"):
        PriorityConsumer.for_topics({"bootstrap.servers": bootstrap_servers, "group.id": "g"},
                                    [unique_name("absent")])
    with pytest.raises(InvalidArgError, match=r"'max\.priority' is required unless 'topics'"):
        PriorityConsumer.for_topics({"bootstrap.servers": bootstrap_servers, "group.id": "g"},
                                    ["^orders.*"])
