"""confluent-kafka PriorityProducer against the real local Apache Kafka broker."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, TopicPartition
from helpers import consume_until, consumer, counts

from priority_kafka.confluent import InvalidArgError, PriorityProducer

pytestmark = pytest.mark.integration


def test_produce_routes_each_priority_to_its_topic(bootstrap_servers: str, topic: str) -> None:
    """produce(priority=p) lands in <topic>-p, the default priority in level 0; deliveries are
    reported with the priority topic."""
    producer = PriorityProducer({"bootstrap.servers": bootstrap_servers, "max.priority": 3})
    delivered: list[str] = []
    for level in (2, 1, 1):
        producer.produce(topic, b"v", key=b"k", priority=level, headers=[("h", b"1")],
                         on_delivery=lambda err, msg: delivered.append(msg.topic()))
    producer.produce(topic, b"default")
    assert producer.flush(30) == 0 and len(producer) == 0 and bool(producer)
    assert sorted(delivered) == [f"{topic}-1", f"{topic}-1", f"{topic}-2"]
    c = consumer(bootstrap_servers, "route")
    try:
        c.assign([TopicPartition(f"{topic}-{level}", 0, 0) for level in range(3)])
        seen: list = []
        while len(seen) < 4:
            seen += consume_until(c, bool, num=10)
        assert counts(seen) == {2: 1, 1: 2, 0: 1}
        assert next(m for m in seen if m.topic().endswith("-2")).headers() == [("h", b"1")]
    finally:
        c.close()


@pytest.mark.parametrize("priority", [3, -1, "2", 1.0, True])
def test_bad_priority_raises_and_sends_nothing(bootstrap_servers: str, priority: object) -> None:
    """A priority outside [0, max.priority) raises KafkaException (and ValueError); nothing is
    queued."""
    producer = PriorityProducer({"bootstrap.servers": bootstrap_servers, "max.priority": 3})
    with pytest.raises(InvalidArgError, match="'priority' must be an integer in") as caught:
        producer.produce("orders", b"v", priority=priority)  # type: ignore[arg-type]
    assert isinstance(caught.value, KafkaException) and isinstance(caught.value, ValueError)
    assert len(producer) == 0


@pytest.mark.parametrize(
    ("config", "key"),
    [({}, "max.priority"), ({"max.priority": 0}, "max.priority"),
     ({"max.priority": 3, "default.priority": 3}, "default.priority")],
)
def test_bad_producer_config_names_the_key(
    bootstrap_servers: str, config: dict[str, int], key: str
) -> None:
    """A missing or bad priority setting raises InvalidArgError naming the key."""
    with pytest.raises(InvalidArgError, match=key.replace(".", r"\.")):
        PriorityProducer({"bootstrap.servers": bootstrap_servers, **config})


def test_bad_topic_names_raise_before_sending(bootstrap_servers: str) -> None:
    """A logical topic that cannot be a Kafka topic raises InvalidArgError."""
    producer = PriorityProducer({"bootstrap.servers": bootstrap_servers, "max.priority": 3})
    with pytest.raises(InvalidArgError, match="'topic'"):
        producer.produce("bad topic", b"v", priority=1)
    assert len(producer) == 0
