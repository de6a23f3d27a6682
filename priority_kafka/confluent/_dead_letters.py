"""Dead letters on confluent-kafka: the stored bytes through a ``confluent_kafka.Producer`` as
they are (the confluent family's dead-letter role, for the ShardedExecutor's adapter and the
ShareExecutor)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from priority_kafka._types import Borrowed, DeadLetterSender, Owned, borrowed_dead_letters
from priority_kafka.errors import ConfigError

__all__ = ["DeadLetterProducer", "confluent_dead_letters"]


def confluent_dead_letters(
    given: Any, connection: Mapping[str, Any] | None, consumer: object
) -> Callable[[], DeadLetterSender]:
    """Dead letters through ``given``: a ``confluent_kafka.Producer`` sends the stored bytes as
    they are (a ``SerializingProducer``'s serializers are bypassed), a kafka-python producer as
    that family sends them, another producer with ``send`` as it is; None: a producer of our
    own connected by ``connection`` (None: ``consumer`` does not tell, ConfigError). Checked
    now, built by the returned call."""
    if isinstance(given, Producer):
        return lambda: Borrowed(DeadLetterProducer(given))
    if given is not None:
        # Only a process that imported kafka-python can hold a KafkaProducer: a confluent
        # process is never made to load it here.
        kafka = sys.modules.get("kafka")
        if kafka is not None and isinstance(given, kafka.KafkaProducer):
            from priority_kafka.kafka_python._dead_letters import kafka_dead_letters

            return kafka_dead_letters(given, dict)
        return borrowed_dead_letters(given)
    if connection is None:
        raise ConfigError(
            "pass 'dead_letter_producer': failure_policy 'dead_letter' needs a producer and "
            f"a plain confluent Consumer {consumer!r} does not expose its connection."
        )
    settings = {**connection, "acks": "all"}
    return lambda: Owned(DeadLetterProducer(settings))


class _Delivery:
    """The outcome of one dead letter: ``get(timeout)`` waits for it, as kafka-python's future."""

    __slots__ = ("_done", "_error", "_producer")

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._done = threading.Event()
        self._error: KafkaError | None = None

    def delivered(self, error: KafkaError | None, message: Any) -> None:
        self._error = error
        self._done.set()

    def get(self, timeout: float | None = None) -> None:
        """Wait for the broker's acknowledgement; raise ``KafkaException`` if it failed."""
        remaining = float("inf") if timeout is None else timeout
        while not self._done.is_set():
            if remaining <= 0:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "dead letter not delivered"))
            step = min(0.1, remaining)
            # Delivery callbacks run in whichever thread polls: this one, or another sender's.
            self._producer.poll(step)
            remaining -= step
        if self._error is not None:
            raise KafkaException(self._error)


class DeadLetterProducer:
    """A ``confluent_kafka.Producer`` with the ``send(...).get(timeout)`` and ``close()`` the
    executor uses for dead letters. Thread-safe, as the producer is."""

    def __init__(self, producer: Producer | Mapping[str, Any]) -> None:
        self._producer = producer if isinstance(producer, Producer) else Producer(dict(producer))

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: Any = None,
    ) -> _Delivery:
        delivery = _Delivery(self._producer)
        # Producer's own produce(): a SerializingProducer's would serialize the stored bytes
        # again.
        Producer.produce(self._producer, topic, value=value, key=key, headers=headers,
                         on_delivery=delivery.delivered)
        return delivery

    def close(self) -> None:
        """Deliver what is queued, then close the producer."""
        self._producer.flush()
        self._producer.close()
