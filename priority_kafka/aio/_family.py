"""The aiokafka family's entry in the registry (:mod:`priority_kafka.families`).

Loaded only when an aiokafka consumer is at hand or the family is chosen by name: importing it
imports aiokafka, never kafka-python or confluent-kafka. The other families' ``_family`` have
the same functions. ``consumer`` and ``producer`` serve synchronous callers (the executor's
``run()``, the CLI, the contract suite): each builds its client on an event loop of its own, on
a thread of its own (:mod:`priority_kafka.aio._bridge`), closed with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer

from priority_kafka._properties import signature_kinds, typed_settings
from priority_kafka._types import ClientConsumer
from priority_kafka.aio._bridge import BridgedProducer, LoopThread, owned_loop
from priority_kafka.aio._client import AioClient
from priority_kafka.aio.consumer import SETTING_KINDS, PriorityConsumer
from priority_kafka.config import normalize_keys, split_configs
from priority_kafka.errors import ConfigError

__all__ = [
    "check_consumer_settings", "client", "consumer", "executor_consumer", "owns", "producer",
]


def owns(consumer: object) -> bool:
    """Whether ``consumer`` is an ``AIOKafkaConsumer`` or our aio PriorityConsumer."""
    return isinstance(consumer, AIOKafkaConsumer | PriorityConsumer)


def client(consumer: Any, commit_timeout_ms: int) -> ClientConsumer:
    """The executor's adapter for ``consumer`` (started, its loop running on another thread)."""
    return AioClient(consumer, commit_timeout_ms=commit_timeout_ms)


def _on_own_loop(build: Any) -> Any:
    """``build()`` on a loop of its own; its client starts it when first used."""
    thread = LoopThread("priority-kafka-aio-consumer")
    try:
        built = thread.build(build)
    except BaseException:
        thread.close()
        raise
    owned_loop(built, thread)
    return built


def consumer(settings: Mapping[str, Any]) -> Any:
    """aiokafka's own ``AIOKafkaConsumer`` with ``settings`` (its names), on a loop of its own
    (its executor client starts it when first used, and closes both)."""
    return _on_own_loop(lambda: AIOKafkaConsumer(**settings))


def producer(settings: Mapping[str, Any]) -> Any:
    """aiokafka's own ``AIOKafkaProducer`` with ``settings``, started on a loop of its own,
    driven synchronously (``send(...).get(timeout)``, ``close()``)."""
    return BridgedProducer.build(dict(settings))


def check_consumer_settings(configs: Mapping[str, Any], max_priority: int | None) -> None:
    """Refuse a misspelt or mistyped setting (aiokafka's or ours) before the broker is
    asked, naming it and the nearest setting."""
    typed = typed_settings(configs, SETTING_KINDS, (ConfigError, "AIOKafkaConsumer"))
    if max_priority is not None:
        split_configs({**normalize_keys(typed), "max_priority": max_priority})


def executor_consumer(
    configs: Mapping[str, Any], max_priority: int | None, dead_letters_to: str | None
) -> tuple[Any, Any]:
    """The consumer an executor's ``run()`` runs over (an aio PriorityConsumer over
    ``max_priority`` levels, or a plain ``AIOKafkaConsumer`` for None) on a loop of its own,
    and the dead-letter producer to give it: None, as the executor builds one that connects as
    the consumer does (``dead_letters_to`` unused)."""
    if max_priority is None:
        settings = normalize_keys(typed_settings(
            configs, signature_kinds(AIOKafkaConsumer), (ConfigError, "AIOKafkaConsumer")
        ))
        return _on_own_loop(lambda: AIOKafkaConsumer(**settings)), None
    return _on_own_loop(lambda: PriorityConsumer(max_priority=max_priority, **configs)), None
