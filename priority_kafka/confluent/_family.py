"""The confluent family's entry in the registry (:mod:`priority_kafka.families`).

Loaded only when a confluent consumer is at hand or the family is chosen by name: importing
it imports confluent-kafka, never kafka-python. The kafka-python family's ``_family`` has the
same functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, Producer

from priority_kafka._types import ClientConsumer
from priority_kafka.confluent._client import ConfluentClient
from priority_kafka.confluent._config import check_group_protocol, named_property
from priority_kafka.confluent.consumer import PriorityConsumer

__all__ = [
    "check_consumer_settings", "client", "consumer", "executor_consumer", "owns", "producer",
]

_SECURITY = ("ssl.", "sasl.", "security.protocol")


def owns(consumer: object) -> bool:
    """Whether ``consumer`` is a ``confluent_kafka.Consumer`` or our PriorityConsumer."""
    return isinstance(consumer, Consumer | PriorityConsumer)


def client(consumer: Any, commit_timeout_ms: int) -> ClientConsumer:
    """The executor's adapter for ``consumer``."""
    return ConfluentClient(consumer, commit_timeout_ms=commit_timeout_ms)


def consumer(settings: Mapping[str, Any]) -> Any:
    """confluent-kafka's own ``Consumer`` with ``settings`` (librdkafka's names)."""
    return Consumer(dict(settings))


def producer(settings: Mapping[str, Any]) -> Any:
    """confluent-kafka's own ``Producer`` with ``settings`` (librdkafka's names)."""
    return Producer(dict(settings))


def check_consumer_settings(configs: Mapping[str, Any], max_priority: int | None) -> None:
    """Refuse properties librdkafka would refuse together, before any connection (with
    PriorityConsumer's message)."""
    check_group_protocol(configs)


def executor_consumer(
    configs: Mapping[str, Any], max_priority: int | None, dead_letters_to: str | None
) -> tuple[Any, Any]:
    """The consumer an executor runs over (a PriorityConsumer over ``max_priority`` levels, or
    a plain ``Consumer`` for None) and the dead-letter producer to give it: for a plain
    ``Consumer``, which unlike a PriorityConsumer does not tell the executor how to connect,
    one connected to ``dead_letters_to`` with the consumer's TLS and SASL settings (None: no
    dead letters, no producer)."""
    if max_priority is not None:
        return PriorityConsumer({**configs, "max.priority": max_priority}), None
    producer = None
    with named_property():
        if dead_letters_to is not None:
            producer = Producer({
                "bootstrap.servers": dead_letters_to,
                **{k: v for k, v in configs.items() if k.startswith(_SECURITY)},
            })
        return Consumer(dict(configs)), producer
