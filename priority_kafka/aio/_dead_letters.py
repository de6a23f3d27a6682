"""Dead letters on aiokafka: the stored bytes through a producer driven across the bridge (the
aiokafka family's dead-letter role; AioClient.dead_letter_producer uses it).

aiokafka's ``ConsumerRecord`` keeps the deserialized key and value only, and a plain
``AIOKafkaConsumer`` has no deserializer unless given one, so what the executor sends is what
it holds: bytes as stored, unless the caller's consumer deserialized them (then the caller's
producer, with its serializers, is the one to give).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer

from priority_kafka._types import Borrowed, DeadLetterSender, Owned, borrowed_dead_letters
from priority_kafka.aio._bridge import BridgedProducer

__all__ = ["aio_dead_letters"]


def aio_dead_letters(
    given: Any, connection: Callable[[], dict[str, Any]]
) -> Callable[[], DeadLetterSender]:
    """Dead letters through ``given`` or, for None, a producer of our own connected by
    ``connection()`` (``acks="all"``), on a loop of its own; checked now, built by the
    returned call. An ``AIOKafkaProducer`` given must be started, on a loop running on another
    thread than the executor's polling thread; it is left open."""
    if given is None:
        configs = connection()
        return lambda: Owned(BridgedProducer.build({**configs, "acks": "all"}))
    if isinstance(given, AIOKafkaProducer):
        return lambda: Borrowed(BridgedProducer(given))
    return borrowed_dead_letters(given)
