"""The exceptions priority_kafka raises.

Every error derives from :class:`PriorityKafkaError`; each also derives from the builtin a
caller would already catch (``ValueError`` for bad input, ``RuntimeError`` for a bad state), so
``except ValueError`` keeps working around code that switched from kafka-python.
"""

from __future__ import annotations

__all__ = [
    "BrokerStartError",
    "ConfigError",
    "DeserializationError",
    "HandlerError",
    "IllegalStateError",
    "MissingTopicsError",
    "PriorityKafkaError",
    "TransactionError",
]


class PriorityKafkaError(Exception):
    """Root of every error raised by priority_kafka itself."""


class ConfigError(PriorityKafkaError, ValueError):
    """A configuration value or argument is invalid; the message names it and what was expected."""


class MissingTopicsError(ConfigError):
    """Priority topics a client was asked to use do not exist on the broker; the message names
    them and how to create them (nothing that only reads, or sends, creates a topic)."""


class IllegalStateError(PriorityKafkaError, RuntimeError):
    """An object was used in a state that does not allow the call (closed, already running)."""


class BrokerStartError(PriorityKafkaError, RuntimeError):
    """The local Apache Kafka broker could not be resolved, started or reached."""


class HandlerError(PriorityKafkaError, RuntimeError):
    """A record handler failed for good and the executor stopped; the cause is chained.

    Attributes name the record (``topic``, ``partition``, ``offset``), the handler calls made
    (``attempts``), the failure ``policy`` in force and the final ``error``.
    """

    def __init__(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        attempts: int,
        policy: str,
        error: BaseException,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.attempts = attempts
        self.policy = policy
        self.error = error
        super().__init__(
            f"handler failed on {topic}[{partition}]@{offset} ({policy!r} policy): {error!r} "
            f"after {attempts} attempt(s)"
        )


class TransactionError(PriorityKafkaError, RuntimeError):
    """An exactly-once executor's transactional producer cannot go on (fenced by a newer
    producer with the same ``transactional.id``, not authorized, or failed fatally); the
    executor stopped. Nothing was committed past what its last committed transaction covers;
    the cause is chained."""


class DeserializationError(PriorityKafkaError, ValueError):
    """A record's key or value deserializer raised; the deserializer's error is chained.

    Carries where the record is (``topic``, ``partition``, ``offset``) and its raw ``key``,
    ``value`` and ``headers``, so it can be dead-lettered as it was. The record was not
    returned, so nothing is committed past it. To skip it, seek past it:
    ``consumer.seek(TopicPartition(e.topic, e.partition), e.offset + 1)``; otherwise the next
    ``poll()`` raises again.
    """

    def __init__(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        error: BaseException,
        record: object = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.error = error
        #: The raw record as the client returned it (kafka-python's ``ConsumerRecord``).
        self.record = record
        super().__init__(
            f"could not deserialize {topic}[{partition}]@{offset}: {error!r}"
        )
