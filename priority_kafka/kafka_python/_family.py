"""The kafka-python family's entry in the registry (:mod:`priority_kafka.families`).

Loaded only when a kafka-python consumer is at hand or the family is chosen by name: every
function here may import kafka-python. The confluent family's ``_family`` has the same ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from priority_kafka._properties import kafka_python_kinds, typed_settings
from priority_kafka._types import ClientConsumer
from priority_kafka.config import normalize_keys
from priority_kafka.kafka_python._client import KafkaClient
from priority_kafka.kafka_python._kafka import KafkaConsumer, KafkaProducer, with_client_defaults
from priority_kafka.kafka_python.consumer import PriorityConsumer
from priority_kafka.kafka_python.consumer._settings import ConsumerSettings, UnknownSettingError

__all__ = [
    "check_consumer_settings", "client", "consumer", "executor_consumer", "owns", "producer",
]


def owns(consumer: object) -> bool:
    """Whether ``consumer`` is a ``KafkaConsumer`` or our PriorityConsumer over them."""
    return isinstance(consumer, KafkaConsumer | PriorityConsumer)


def client(consumer: Any, commit_timeout_ms: int) -> ClientConsumer:
    """The executor's adapter for ``consumer`` (with kafka-python's work-arounds)."""
    return KafkaClient(consumer, commit_timeout_ms=commit_timeout_ms)


def consumer(settings: Mapping[str, Any]) -> Any:
    """kafka-python's own ``KafkaConsumer`` with ``settings`` (its names), as the library
    builds it: no defaults of ours."""
    return KafkaConsumer(**settings)


def producer(settings: Mapping[str, Any]) -> Any:
    """kafka-python's own ``KafkaProducer`` with ``settings`` (its names)."""
    return KafkaProducer(**settings)


def check_consumer_settings(configs: Mapping[str, Any], max_priority: int | None) -> None:
    """Refuse a misspelt or mistyped consumer setting, before the broker is asked; checked as
    a PriorityConsumer's (a superset of KafkaConsumer's)."""
    ConsumerSettings.parse({**configs, "max_priority": max_priority or 1})


def executor_consumer(
    configs: Mapping[str, Any], max_priority: int | None, dead_letters_to: str | None
) -> tuple[Any, Any]:
    """The consumer an executor runs over (a PriorityConsumer over ``max_priority`` levels, or
    a plain ``KafkaConsumer`` for None) and the dead-letter producer to give it: None, as the
    executor builds one that connects as the consumer does (``dead_letters_to`` unused)."""
    if max_priority is None:
        consumer: Any = KafkaConsumer(**with_client_defaults(normalize_keys(typed_settings(
            configs, kafka_python_kinds(KafkaConsumer), (UnknownSettingError, "KafkaConsumer")))))
    else:
        consumer = PriorityConsumer(max_priority=max_priority, **configs)
    return consumer, None
