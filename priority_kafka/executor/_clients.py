"""as_client: the one place that tells the client families apart for the executor.

A kafka-python consumer (``KafkaConsumer`` or :class:`~priority_kafka.PriorityConsumer`) gets
``KafkaClient``, which carries kafka-python's work-arounds; a confluent one (``Consumer`` or
``priority_kafka.confluent.PriorityConsumer``) gets ``ConfluentClient``; each is imported only
then, so the executor never imports one family's client for the other's consumer; an object that
already has the client shape (an adapter, a test fake) is used as it is.
"""

from __future__ import annotations

import sys
from typing import Any

from priority_kafka._types import ClientConsumer, check_client_consumer
from priority_kafka.config import DEFAULT_COMMIT_TIMEOUT_MS

__all__ = ["as_client"]


def as_client(
    consumer: Any, commit_timeout_ms: int = DEFAULT_COMMIT_TIMEOUT_MS
) -> ClientConsumer:
    """The executor's client for ``consumer``, its synchronous commits bounded by
    ``commit_timeout_ms``; TypeError naming what is missing otherwise."""
    if _is_kafka_python(consumer):
        from priority_kafka.kafka_python._client import KafkaClient

        return KafkaClient(consumer, commit_timeout_ms=commit_timeout_ms)
    if _is_confluent(consumer):
        from priority_kafka.confluent._client import ConfluentClient

        return ConfluentClient(consumer, commit_timeout_ms=commit_timeout_ms)
    check_client_consumer(consumer)
    return consumer


def _is_kafka_python(consumer: object) -> bool:
    # kafka-python is loaded if the consumer is one of its own (or ours over it); a confluent
    # executor's process never imports it.
    if "kafka" not in sys.modules:
        return False
    from priority_kafka.kafka_python._kafka import KafkaConsumer
    from priority_kafka.kafka_python.consumer import PriorityConsumer

    return isinstance(consumer, KafkaConsumer | PriorityConsumer)


def _is_confluent(consumer: object) -> bool:
    # confluent-kafka is loaded if the consumer is one of its own (or ours over it).
    if "confluent_kafka" not in sys.modules:
        return False
    from confluent_kafka import Consumer

    from priority_kafka.confluent.consumer import PriorityConsumer as ConfluentPriorityConsumer

    return isinstance(consumer, Consumer | ConfluentPriorityConsumer)
