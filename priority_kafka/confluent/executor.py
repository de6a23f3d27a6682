"""ShardedExecutor on confluent-kafka: adapters to the kafka-python shaped consumer protocol.

``ShardedExecutor(ClientConsumer(priority_consumer), handler, dead_letter_producer=
DeadLetterProducer(producer))`` runs the executor on a confluent :class:`PriorityConsumer` (or,
through :class:`ClientConsumer`, a plain ``confluent_kafka.Consumer`` as one level). The
adapters turn messages into :class:`Record` objects keyed by ``kafka.TopicPartition``, and run
the executor's rebalance listener (coroutines) to completion inside ``poll()``, on the polling
thread, from confluent's ``on_assign``/``on_revoke``/``on_lost`` callbacks.

The consumer must be created with ``"enable.auto.commit": False``: the executor commits only
what its handlers finished, and librdkafka's auto-commit would commit what ``poll()`` returned.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition

from priority_kafka._kafka import OffsetAndMetadata, TopicPartition
from priority_kafka._types import Levels
from priority_kafka.confluent.consumer import PriorityConsumer
from priority_kafka.errors import ConfigError

__all__ = ["ClientConsumer", "DeadLetterProducer", "PriorityClientConsumer", "Record"]


class Record:
    """One consumed message, with kafka-python ``ConsumerRecord``'s field names."""

    __slots__ = ("headers", "key", "offset", "partition", "timestamp", "topic", "value")

    def __init__(self, message: Any) -> None:
        self.topic: str = message.topic()
        self.partition: int = message.partition()
        self.offset: int = message.offset()
        self.key: bytes | None = message.key()
        self.value: bytes | None = message.value()
        self.headers: list[tuple[str, bytes]] = message.headers() or []
        self.timestamp: int = message.timestamp()[1]  # ms since the epoch; -1 if unknown

    def __repr__(self) -> str:
        return f"Record({self.topic!r}, {self.partition}, {self.offset})"


class _Completed:
    """An awaitable that is already done: the outcome of a commit made synchronously."""

    __slots__ = ("_error", "_result")

    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        self._result = result
        self._error = error

    def __await__(self) -> Generator[Any, None, Any]:
        if self._error is not None:
            raise self._error
        return self._result
        yield  # a generator, as __await__ must return an iterator


def _to_kafka(partitions: Iterable[ConfluentPartition]) -> set[TopicPartition]:
    return {TopicPartition(tp.topic, tp.partition) for tp in partitions}


def _to_confluent(partitions: Iterable[TopicPartition]) -> list[ConfluentPartition]:
    return [ConfluentPartition(tp.topic, tp.partition) for tp in partitions]


class ClientConsumer:
    """A ``confluent_kafka.Consumer`` (or confluent PriorityConsumer) in kafka-python's shape.

    ``poll(timeout_ms, max_records)`` returns ``{kafka.TopicPartition: [Record, ...]}``;
    ``max_records`` defaults to ``max_poll_records`` (500). Error events raise
    ``KafkaException`` (a partition EOF is skipped). Like the consumer, use it from one thread.
    """

    def __init__(self, consumer: Consumer | PriorityConsumer, max_poll_records: int = 500) -> None:
        self._consumer = consumer
        self._max_poll_records = max_poll_records
        self._topics: list[str] = []
        self._paused: set[TopicPartition] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def consumer(self) -> Consumer | PriorityConsumer:
        """The wrapped confluent consumer."""
        return self._consumer

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Record]]:
        """Messages grouped by partition, in the order the consumer returned them."""
        messages = self._consumer.consume(
            max_records or self._max_poll_records, max(0.0, timeout_ms / 1000)
        )
        batch: dict[TopicPartition, list[Record]] = {}
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(error)
            record = Record(message)
            tp = TopicPartition(record.topic, record.partition)
            records = batch.get(tp)
            if records is None:
                batch[tp] = [record]
            else:
                records.append(record)
        return batch

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        """Subscribe to topics (or a regex); ``listener`` has kafka-python's
        ``AsyncConsumerRebalanceListener`` methods, run here on the polling thread."""
        names = [f"^{pattern}"] if pattern is not None else list(topics)
        if not names:
            raise ConfigError("subscribe() needs topics or a pattern.")
        hooks: dict[str, Callable[[Any, list[ConfluentPartition]], None]] = {}
        if listener is not None:
            hooks = {
                "on_assign": self._hook(listener.on_partitions_assigned, forget=False),
                "on_revoke": self._hook(listener.on_partitions_revoked, forget=True),
                "on_lost": self._hook(listener.on_partitions_lost, forget=True),
            }
        self._consumer.subscribe(names, **hooks)
        self._topics = list(names)

    def _hook(
        self, method: Callable[[set[TopicPartition]], Any], forget: bool
    ) -> Callable[[Any, list[ConfluentPartition]], None]:
        def called(consumer: Any, partitions: list[ConfluentPartition]) -> None:
            converted = _to_kafka(partitions)
            if forget:
                self._paused -= converted
            result = method(converted)
            if isinstance(result, Coroutine):
                self._run(result)

        return called

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Drive a listener coroutine to completion on this adapter's private event loop."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(coroutine)

    def subscription(self) -> set[str] | None:
        """The topics subscribed to through this adapter."""
        return set(self._topics) or None

    def assignment(self) -> set[TopicPartition]:
        return _to_kafka(self._consumer.assignment())

    def pause(self, *partitions: TopicPartition) -> None:
        self._consumer.pause(_to_confluent(partitions))
        self._paused.update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._consumer.resume(_to_confluent(partitions))
        self._paused.difference_update(partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._consumer.seek(ConfluentPartition(partition.topic, partition.partition, offset))

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit the given offsets synchronously."""
        if offsets:
            committed = [
                ConfluentPartition(tp.topic, tp.partition, meta.offset)
                for tp, meta in offsets.items()
            ]
            self._consumer.commit(offsets=committed, asynchronous=False)

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Awaitable[Any]:
        """Commit synchronously (librdkafka allows it inside a rebalance callback); return an
        awaitable already done, raising the commit's error if it failed."""
        try:
            self.commit(offsets)
        except Exception as exc:
            return _Completed(error=exc)
        return _Completed(dict(offsets))

    def close(self) -> None:
        try:
            self._consumer.close()
        finally:
            if self._loop is not None:
                self._loop.close()
                self._loop = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._consumer!r})"


class PriorityClientConsumer(ClientConsumer):
    """A confluent :class:`PriorityConsumer` in kafka-python's shape, with its levels."""

    _consumer: PriorityConsumer

    def __init__(self, consumer: PriorityConsumer) -> None:
        super().__init__(consumer, consumer.config.max_poll_records)

    @property
    def levels(self) -> Levels:
        """The levels' reserved shares (highest first) and the level of a priority topic."""
        return Levels(self._consumer.reserved_quotas, self._consumer.priority_of)

    @property
    def reserved_quotas(self) -> dict[int, int]:
        return self._consumer.reserved_quotas

    def priority_of(self, topic: str) -> int:
        return self._consumer.priority_of(topic)


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
        self._producer.produce(topic, value=value, key=key, headers=headers,
                               on_delivery=delivery.delivered)
        return delivery

    def close(self) -> None:
        """Deliver what is queued, then close the producer."""
        self._producer.flush()
        self._producer.close()
