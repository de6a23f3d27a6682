"""Key and value deserializers, applied by PriorityConsumer rather than inside kafka-python.

kafka-python stops returning records from a fetch after a deserializer raised
(``_kafka.DESERIALIZER_ERROR_STOPS_POLL``); applied here, a failure becomes a
:class:`~priority_kafka.errors.DeserializationError` naming the record, and nothing is lost.
"""

from __future__ import annotations

from typing import Any

from priority_kafka.errors import DeserializationError
from priority_kafka.kafka_python._kafka import ConsumerRecord, TopicPartition

__all__ = ["DeserializedRecord", "Deserializers"]

Batches = dict[TopicPartition, list[ConsumerRecord]]


class DeserializedRecord(ConsumerRecord):
    """A ``ConsumerRecord`` whose key and value went through the consumer's deserializers.

    ``raw_key`` and ``raw_value`` keep the bytes as stored in Kafka: what a dead letter must
    carry (the executor sends those), whatever the deserializers made of them.
    """

    raw_key: bytes | None
    raw_value: bytes | None


def _apply(deserializer: Any, record: ConsumerRecord, data: bytes | None) -> Any:
    """Deserialize as kafka-python does: a ``Deserializer`` object or a plain callable."""
    if deserializer is None:
        return data
    if hasattr(deserializer, "deserialize"):
        return deserializer.deserialize(record.topic, record.headers, data)
    return deserializer(data)


class Deserializers:
    """A consumer's ``key_deserializer`` and ``value_deserializer`` (either may be None)."""

    __slots__ = ("active", "key", "value")

    def __init__(self, key: Any, value: Any) -> None:
        self.key = key
        self.value = value
        self.active = (key, value) != (None, None)

    def __call__(self, record: ConsumerRecord) -> ConsumerRecord:
        """The record with its key and value deserialized; DeserializationError if one fails."""
        try:
            result = DeserializedRecord._make(record)._replace(
                key=_apply(self.key, record, record.key),
                value=_apply(self.value, record, record.value),
            )
        except Exception as exc:
            raise DeserializationError(
                topic=record.topic, partition=record.partition, offset=record.offset,
                key=record.key, value=record.value, headers=list(record.headers or ()),
                error=exc, record=record,
            ) from exc
        result.raw_key, result.raw_value = record.key, record.value
        return result

    def split(self, raw: Batches) -> tuple[Batches, Batches, DeserializationError | None]:
        """The deserialized records before the first failure, the raw rest, and the failure."""
        if not self.active:
            return raw, {}, None
        records: Batches = {}
        rest: Batches = {}
        error = None
        for tp, batch in raw.items():
            if error is not None:
                rest[tp] = batch
                continue
            done: list[ConsumerRecord] = []
            for index, record in enumerate(batch):
                try:
                    done.append(self(record))
                except DeserializationError as exc:
                    error, rest[tp] = exc, batch[index:]
                    break
            if done:
                records[tp] = done
        return records, rest, error
