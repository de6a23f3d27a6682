"""PriorityProducer: aiokafka's AIOKafkaProducer that routes each record to its priority topic."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer

from priority_kafka._checks import MAX_PRIORITY, check_int
from priority_kafka._levels import ProducerFront
from priority_kafka._properties import INT, signature_kinds, typed_settings
from priority_kafka._topic_levels import TopicLevels
from priority_kafka.config import normalize_keys
from priority_kafka.errors import ConfigError, IllegalStateError
from priority_kafka.naming import priority_topic

__all__ = ["PriorityProducer"]

_SETTING_KINDS = {**signature_kinds(AIOKafkaProducer), "max_priority": INT, "default_priority": INT}

#: ``send()``'s priority when none is given (an explicit None is refused).
DEFAULT: Any = object()


class PriorityProducer(ProducerFront):
    """Send records to priority topics with ``aiokafka.AIOKafkaProducer``'s API.

    ``await producer.send("orders", value, priority=2)`` sends to the Kafka topic
    ``orders-2``. One ``AIOKafkaProducer`` serves every level, so its batching, retries,
    idempotence, transactions and per-partition order hold unchanged. Takes every
    ``AIOKafkaProducer`` argument (by name or Java-style dotted name) plus ``max_priority``
    (required) and ``default_priority`` (the level of a send given none; default 0). As
    ``AIOKafkaProducer``, it is built inside a running loop.

    Never creates a level topic: a send checks that its level topic exists, from the cluster's
    topic list, asked when a topic is first sent to, when a level not seen is named and every
    5 minutes (sends to known levels are a dict look-up); a priority outside
    ``[0, max_priority)`` raises ValueError (ConfigError) and a missing level topic
    MissingTopicsError naming the levels the topic has. Nothing is sent then.
    """

    def __init__(self, **configs: Any) -> None:
        # A string value (a .properties file, a command line) becomes its setting's type.
        settings = normalize_keys(
            typed_settings(configs, _SETTING_KINDS, (ConfigError, "AIOKafkaProducer"))
        )
        self._max_priority = check_int(
            "max_priority", settings.pop("max_priority", None), minimum=1, maximum=MAX_PRIORITY
        )
        self._default_priority = check_int(
            "default_priority", settings.pop("default_priority", 0), minimum=0,
            maximum=self._max_priority - 1,
        )
        self._producer = AIOKafkaProducer(**settings)
        self._topic_levels = TopicLevels(_unused_fetch)
        self._closed = False

    @property
    def producer(self) -> AIOKafkaProducer:
        """The ``AIOKafkaProducer`` every level is sent through (for its transactions:
        ``begin_transaction()``, ``send_offsets_to_transaction()``, ...)."""
        return self._producer

    async def start(self) -> None:
        """Connect (and, with a ``transactional_id``, fence its earlier holder)."""
        await self._producer.start()

    async def stop(self) -> None:
        """Flush and close; later sends raise."""
        self._closed = True
        await self._producer.stop()

    async def flush(self) -> None:
        """Wait until every buffered record is sent."""
        await self._producer.flush()

    async def send(
        self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
        timestamp_ms: int | None = None, headers: Sequence[tuple[str, bytes]] | None = None,
        priority: int = DEFAULT,
    ) -> Any:
        """Queue a record for ``<topic>-<priority>``; returns aiokafka's future of its
        ``RecordMetadata`` (await it for the broker's answer)."""
        name = await self._level_topic(topic, priority)
        return await self._producer.send(
            name, value=value, key=key, partition=partition, timestamp_ms=timestamp_ms,
            headers=headers,
        )

    async def send_and_wait(
        self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
        timestamp_ms: int | None = None, headers: Sequence[tuple[str, bytes]] | None = None,
        priority: int = DEFAULT,
    ) -> Any:
        """:meth:`send` and wait for the broker's answer: the record's ``RecordMetadata``."""
        future = await self.send(topic, value, key, partition, timestamp_ms, headers, priority)
        return await future

    async def partitions_for(self, topic: str) -> dict[int, set[int]]:
        """Partition ids of every level of a logical topic, highest level first;
        MissingTopicsError naming the levels if one does not exist (asking aiokafka for its
        partitions would create it)."""
        found = {}
        for level in range(self._max_priority - 1, -1, -1):
            name = await self._level_topic(topic, level)
            found[level] = await self._producer.partitions_for(name)
        return found

    async def _level_topic(self, topic: str, priority: object) -> str:
        if self._closed:
            raise IllegalStateError("PriorityProducer is stopped.")
        level = self._default_priority if priority is DEFAULT else check_int(
            "priority", priority, minimum=0, maximum=self._max_priority - 1
        )
        name = priority_topic(topic, level)  # the name checked, naming it
        levels = self._topic_levels
        if levels.due(topic, level):
            try:
                metadata = await self._producer.client.fetch_all_metadata()
            except Exception as exc:
                levels.failed(topic, level, exc)
            else:
                levels.fetched(metadata.topics())
        levels.known(topic, level)
        return name

    async def __aenter__(self) -> PriorityProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def __repr__(self) -> str:
        return f"PriorityProducer(max_priority={self._max_priority}, closed={self._closed})"


def _unused_fetch() -> list[str]:
    # The producer asks for the topic list itself, asynchronously (TopicLevels.due).
    raise AssertionError("the aio PriorityProducer fetches the topic list itself")
