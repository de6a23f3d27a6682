"""PriorityProducer and create_priority_topics against the real broker."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient

from priority_kafka import ConfigError, IllegalStateError, PriorityProducer, create_priority_topics

pytestmark = pytest.mark.integration


def read_all(bootstrap_servers, topics):
    """Every record of the given topics, read with a plain kafka-python consumer."""
    c = KafkaConsumer(bootstrap_servers=bootstrap_servers, consumer_timeout_ms=3000)
    c.assign([TopicPartition(t, 0) for t in topics])
    c.seek_to_beginning()
    try:
        return [(r.topic, r.key, r.value) for r in c]
    finally:
        c.close()


def test_send_routes_each_record_to_its_priority_topic(bootstrap_servers, unique_name):
    """send(priority=p) lands in <topic>-<p>; no priority means the default level."""
    topic = unique_name("orders")
    names = create_priority_topics(bootstrap_servers, topic, 3)
    with PriorityProducer(
        bootstrap_servers=bootstrap_servers, max_priority=3, default_priority=1
    ) as p:
        p.send(topic, b"high", key=b"k", priority=2)
        p.send(topic, b"default")
        p.send(topic, b"low", priority=0).get(timeout=30)
        p.flush()
        assert p.partitions_for(topic) == {2: {0}, 1: {0}, 0: {0}}
    assert sorted(read_all(bootstrap_servers, names)) == [
        (f"{topic}-0", None, b"low"),
        (f"{topic}-1", None, b"default"),
        (f"{topic}-2", b"k", b"high"),
    ]


@pytest.mark.parametrize("priority", [-1, 3, 1.0, True, "2"])
def test_a_priority_outside_the_levels_raises_and_sends_nothing(
    bootstrap_servers, unique_name, priority
):
    """A bad priority raises ValueError naming it, and no record reaches any level."""
    topic = unique_name("orders")
    names = create_priority_topics(bootstrap_servers, topic, 3)
    with PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=3) as p:
        with pytest.raises(ValueError, match=r"'priority' must be an integer in \[0, 3\)"):
            p.send(topic, b"x", priority=priority)
        p.flush()
    assert read_all(bootstrap_servers, names) == []


def test_create_priority_topics_is_idempotent(bootstrap_servers, unique_name):
    """Creating the same priority topics twice succeeds and keeps the first partition counts."""
    topic = unique_name("orders")
    first = create_priority_topics(bootstrap_servers, topic, 2, num_partitions=3)
    again = create_priority_topics(bootstrap_servers, topic, 2, num_partitions=1)
    assert first == again == [f"{topic}-1", f"{topic}-0"]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        described = admin.describe_topics(first)
    finally:
        admin.close()
    assert [len(t["partitions"]) for t in described] == [3, 3]


def test_bad_producer_settings_fail_clearly(bootstrap_servers):
    """max_priority, default_priority and partition counts are validated up front."""
    with pytest.raises(ConfigError, match="'max_priority' must be an integer >= 1"):
        PriorityProducer(bootstrap_servers=bootstrap_servers)
    with pytest.raises(ConfigError, match=r"'default_priority' must be an integer in \[0, 2\)"):
        PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=2, default_priority=2)
    with pytest.raises(ConfigError, match="'num_partitions' must be an integer >= 1"):
        create_priority_topics(bootstrap_servers, "t", 3, num_partitions=0)


def test_dotted_keys_and_closed_producer(bootstrap_servers):
    """Java-style keys configure the producer; send() after close() raises IllegalStateError."""
    p = PriorityProducer(**{"bootstrap.servers": bootstrap_servers, "max.priority": 2})
    assert p.max_priority == 2
    p.close()
    with pytest.raises(IllegalStateError, match="closed"):
        p.send("t", b"x")


def test_reconnect_backoff_defaults_to_one_second_unless_given(monkeypatch):
    """The producer reconnects after at most 1 s unless the user set the backoff."""
    import priority_kafka.kafka_python.producer as producer_module

    made = []
    monkeypatch.setattr(producer_module, "KafkaProducer", lambda **configs: made.append(configs))
    PriorityProducer(max_priority=2)
    PriorityProducer(max_priority=2, reconnect_backoff_max_ms=5000)
    assert [configs["reconnect_backoff_max_ms"] for configs in made] == [1000, 5000]
