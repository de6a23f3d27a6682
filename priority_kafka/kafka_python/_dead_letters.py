"""Dead letters on kafka-python: the stored bytes through a producer that does not serialize
them again (the kafka-python family's dead-letter role; KafkaClient.dead_letter_producer
and the confluent family's, for a kafka-python producer it is given, use it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from priority_kafka._types import DeadLetterSender, Owned, borrowed_dead_letters
from priority_kafka.kafka_python._kafka import KafkaProducer, with_client_defaults

__all__ = ["kafka_dead_letters"]

_SERIALIZERS = ("key_serializer", "value_serializer")


def kafka_dead_letters(
    given: Any, connection: Callable[[], dict[str, Any]]
) -> Callable[[], DeadLetterSender]:
    """Dead letters through ``given`` (a producer with ``send``) or, for None, a KafkaProducer
    connected by ``connection()``; checked now, built by the returned call.

    A dead letter is the record's bytes as stored. A ``KafkaProducer`` with a key or value
    serializer would serialize them again (and fail on bytes it does not expect), so stored
    bytes go through a producer of our own with its settings but no serializers; a record
    whose stored bytes are gone (a plain ``KafkaConsumer`` deserialized it) goes through the
    caller's producer, whose serializers get the values they expect.
    """
    if given is None:
        configs = connection()
        return lambda: Owned(KafkaProducer(**with_client_defaults(configs), acks="all"))
    if isinstance(given, KafkaProducer) and any(given.config.get(key) for key in _SERIALIZERS):
        settings = {
            key: value for key, value in given.config.items()
            if key in KafkaProducer.DEFAULT_CONFIG and key not in _SERIALIZERS
        }
        return lambda: _Reserializing(given, KafkaProducer(**settings))
    return borrowed_dead_letters(given)


class _Reserializing:
    """Stored bytes through ``raw`` (ours, closed with the executor), deserialized values
    through the caller's ``serializing`` producer."""

    __slots__ = ("_raw", "_serializing")

    def __init__(self, serializing: Any, raw: Any) -> None:
        self._serializing = serializing
        self._raw = raw

    def send(
        self, topic: str, value: Any = None, key: Any = None, headers: Any = None
    ) -> Any:
        stored = isinstance(value, bytes | None) and isinstance(key, bytes | None)
        producer = self._raw if stored else self._serializing
        return producer.send(topic, value=value, key=key, headers=headers)

    def close(self) -> None:
        self._raw.close()
