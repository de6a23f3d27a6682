"""What the executor needs of a consumer: a kafka-python shaped protocol, and its priority levels.

Each client family has one adapter of the :class:`ClientConsumer` shape at its edge (its
folder's ``_client`` module: ``priority_kafka.kafka_python._client.KafkaClient``, ...);
``priority_kafka.executor._clients.as_client`` picks it, so the executor takes any family's
consumer as it is (see docs/executor.md). :class:`Levels` is the one notion of priority the
executor uses: every front end (each family's PriorityConsumer, the share consumer, each
adapter) shows its ``levels``; an adapter over a plain consumer shows :data:`ONE_LEVEL`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

import attrs

from priority_kafka._checks import shown
from priority_kafka._structs import OffsetAndMetadata, TopicPartition
from priority_kafka.errors import ConfigError

__all__ = [
    "ONE_LEVEL", "Answered", "Borrowed", "ClientConsumer", "DeadLetterSender", "Levels",
    "MetadataTooLarge", "Owned", "PendingCommit", "TransactionalSender", "check_client_consumer",
]


class DeadLetterSender(Protocol):
    """Sends a dead letter's stored bytes as they are; thread-safe (workers call ``send``)."""

    def send(
        self, topic: str, value: bytes | None = ..., key: bytes | None = ..., headers: Any = ...
    ) -> Any:
        """Queue the message; the result's ``get(timeout)`` waits for the broker's ack."""

    def close(self) -> None:
        """Close what the executor built (a producer of the caller's stays open)."""


class Owned:
    """A producer the executor built for dead letters: closed with it."""

    __slots__ = ("close", "send")

    def __init__(self, producer: Any) -> None:
        self.send = producer.send
        self.close = producer.close


class Borrowed:
    """The caller's dead-letter producer: used, never closed (its owner closes it)."""

    __slots__ = ("send",)

    def __init__(self, producer: Any) -> None:
        self.send = producer.send

    def close(self) -> None:
        return None


def borrowed_dead_letters(given: Any) -> Callable[[], DeadLetterSender]:
    """Dead letters through the caller's producer ``given``, left open (each family's
    ``_dead_letters`` for a producer that is not its own kind); ConfigError now if it has no
    ``send``."""
    if not callable(getattr(given, "send", None)):
        raise ConfigError(
            f"'dead_letter_producer' must have a send(topic, value=, key=, headers=) method "
            f"(got {given!r})."
        )
    return lambda: Borrowed(given)


class TransactionalSender(Protocol):
    """A transactional producer of one client family, as the exactly-once executor drives it
    (from one thread at a time). Each call blocks until the broker answered; one raising
    leaves the transaction to :meth:`abort`."""

    def init(self) -> None:
        """Fence an earlier producer with the same transactional id (its open transaction is
        aborted) and get ready; once, before the first transaction."""

    def begin(self) -> None: ...

    def send(self, output: Any) -> None:
        """Queue an ``Output`` in the open transaction."""

    def send_offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_metadata: Any
    ) -> None:
        """Add one consumer group's offsets (``group_metadata`` of its member) to it."""

    def commit(self) -> None:
        """Deliver what was queued and commit the transaction (retrying what may be)."""

    def abort(self) -> None:
        """Abort the open transaction; raises if the producer cannot go on (fenced, fatal)."""

    def close(self) -> None:
        """Close what the executor built (a producer of the caller's stays open)."""


class PendingCommit(Protocol):
    """A commit sent and not waited for: ``is_done`` once it was answered (a kafka-python
    ``Future`` has this shape); ``exception`` is then its error, None if it succeeded."""

    @property
    def is_done(self) -> bool: ...

    @property
    def exception(self) -> BaseException | None: ...


@attrs.frozen
class Answered:
    """A :class:`PendingCommit` already answered (a commit made synchronously)."""

    exception: BaseException | None = None
    is_done: bool = True


class MetadataTooLarge(Exception):
    """A commit was refused because its metadata is longer than the broker's
    ``offset.metadata.max.bytes`` (each adapter raises it for its family's error, chained)."""


class ClientConsumer(Protocol):
    """The consumer calls ShardedExecutor makes, all from its polling thread.

    A rebalance listener passed to ``subscribe`` has kafka-python's
    ``AsyncConsumerRebalanceListener`` methods; the consumer drives them to completion from
    inside ``poll()``. ``commit_async`` returns something the revoke hook can await.
    """

    def poll(
        self, timeout_ms: float = ..., max_records: int | None = ...
    ) -> Mapping[TopicPartition, list[Any]]: ...

    def pause(self, *partitions: TopicPartition) -> None: ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def paused(self) -> set[TopicPartition]: ...

    def assignment(self) -> set[TopicPartition]: ...

    def subscription(self) -> set[str] | None: ...

    def subscribe(
        self, topics: Iterable[str] = ..., pattern: str | None = ..., listener: Any = ...
    ) -> None: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit synchronously, metadata included; MetadataTooLarge if the broker refused
        the metadata's length."""

    def fetch_committed(
        self, partitions: Iterable[TopicPartition]
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        """The committed offset and metadata of each of ``partitions`` that has one
        (blocking; the polling thread calls it outside ``poll()``)."""

    def commit_async(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Awaitable[Any]: ...

    def commit_in_background(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> PendingCommit:
        """Send a commit without waiting for its answer where the client can (the executor's
        periodic commits: the polling thread goes on polling meanwhile); MetadataTooLarge as
        :meth:`commit`, as the answer's ``exception``."""

    def close(self) -> None: ...

    def transactions(self, producer: Any, owned: bool = False) -> TransactionalSender:
        """``producer`` (the executor's ``transactional_producer``, or one its factory built),
        checked now (ConfigError naming what is wrong: another family's producer, no
        transactional id), as the exactly-once executor drives it; ``owned``: the sender's
        ``close`` closes it."""

    def transaction_groups(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> list[tuple[Any, dict[TopicPartition, OffsetAndMetadata]]]:
        """``offsets`` split by consumer group (a PriorityConsumer: one group per level), each
        with its member's group metadata now, for ``send_offsets_to_transaction`` (KIP-447:
        a member a rebalance fenced is refused)."""

    def rejoin_refused(
        self, error: BaseException, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> bool:
        """After ``send_offsets_to_transaction`` of ``offsets`` (one group's) failed with
        ``error``: if the group refused the membership they were sent with (a member or a
        generation it no longer knows), make that group's member rejoin at its next poll, not
        when its heartbeat finds out (seconds in which every transaction is refused and
        aborted, and its records handled again); True if so."""

    @property
    def levels(self) -> Levels: ...

    def dead_letter_producer(self, given: Any) -> Callable[[], DeadLetterSender]:
        """Check ``given`` (the executor's ``dead_letter_producer``; None: build one that
        connects as the consumer does) now, raising ConfigError naming what is wrong; the
        returned call builds the sender when :meth:`ShardedExecutor.run` starts."""


_REQUIRED = (
    "poll", "pause", "resume", "paused", "assignment", "subscription", "subscribe", "seek",
    "commit", "commit_async", "commit_in_background", "fetch_committed", "close",
    "dead_letter_producer",
    "transactions", "transaction_groups",
)


def check_client_consumer(consumer: object) -> None:
    """Raise TypeError naming what is missing unless ``consumer`` looks like a ClientConsumer."""
    missing = [name for name in _REQUIRED if not callable(getattr(consumer, name, None))]
    if not isinstance(getattr(consumer, "levels", None), Levels):
        missing.append("levels")
    if missing:
        raise TypeError(
            f"'consumer' must be a KafkaConsumer, a PriorityConsumer or an object with their "
            f"methods; {shown(consumer)} lacks {', '.join(missing)}."
        )


def _one_level(topic: str) -> int:
    return 0


@attrs.frozen
class Levels:
    """Priority levels of a consumer: each level's reserved share, and the level of a topic."""

    #: Reserved share of each level, highest level first (any positive scale).
    reserved: Mapping[int, int]
    #: The level of a Kafka topic the consumer returns records of.
    level_of: Callable[[str], int] = _one_level


#: The levels of a plain consumer (a library's own, not a PriorityConsumer): one level.
ONE_LEVEL = Levels(MappingProxyType({0: 1}))
