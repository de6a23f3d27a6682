"""KafkaClient: a kafka-python consumer as the executor's client, with kafka-python's work-arounds.

:class:`~priority_kafka.ShardedExecutor` speaks :class:`~priority_kafka._types.ClientConsumer`,
which is kafka-python's shape; what it must do *because of kafka-python* lives here, at that
family's edge, so the executor loop knows no client library: releasing a resumed partition's
parked records (PARKED_RECORDS_STUCK) before each poll, keeping a forgotten rejoin
(FORGETS_PENDING_JOIN, REPLACES_FINISHED_JOIN) after it, polling at least JOIN_POLL_MS while
the group (re)joins (JOIN_NEEDS_BLOCKING_POLL), and building the dead-letter producer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from priority_kafka._rebalance import ChainedListener
from priority_kafka._types import ONE_LEVEL, DeadLetterSender, Levels, MetadataTooLarge
from priority_kafka.config import (
    COMMITTED_TIMEOUT_MS,
    DEFAULT_COMMIT_TIMEOUT_MS,
    connection_configs,
)
from priority_kafka.errors import ConfigError
from priority_kafka.kafka_python._dead_letters import kafka_dead_letters
from priority_kafka.kafka_python._kafka import (
    JOIN_POLL_MS,
    CommitFailedError,
    Future,
    KafkaConsumer,
    OffsetAndMetadata,
    OffsetMetadataTooLargeError,
    TopicPartition,
    forget_earlier_offset_fetches,
    kafka_offsets,
    kafka_partitions,
    keep_pending_join,
    poll_through_lost_connections,
    release_parked_records,
)
from priority_kafka.kafka_python._membership import drop_refused_membership, forget_kept_positions
from priority_kafka.kafka_python._transactions import KafkaTransactions
from priority_kafka.kafka_python.consumer import PriorityConsumer

__all__ = ["KafkaClient"]


class KafkaClient:
    """A ``kafka.KafkaConsumer`` or kafka-python :class:`~priority_kafka.PriorityConsumer` in
    the executor's client shape; every call goes to the consumer, from the polling thread."""

    __slots__ = ("_closing", "_commit_timeout_ms", "_consumer", "_joining", "_kept")

    def __init__(self, consumer: Any, commit_timeout_ms: int = DEFAULT_COMMIT_TIMEOUT_MS) -> None:
        self._consumer = forget_earlier_offset_fetches(consumer)
        self._commit_timeout_ms = commit_timeout_ms
        # True from subscribing (and from an eager revoke) until some partitions are assigned:
        # kafka-python 3 completes a join only inside a poll long enough for it.
        self._joining = False
        # close() revokes everything through the listener, from inside the consumer's close:
        # no join follows, and a closed PriorityConsumer refuses assignment().
        self._closing = False
        #: Partitions revoked eagerly (still assigned), until the rebalance assigns anew.
        self._kept: set[TopicPartition] = set()

    @property
    def consumer(self) -> Any:
        """The consumer this client drives."""
        return self._consumer

    @property
    def levels(self) -> Levels:
        """The consumer's priority levels (one level for a ``KafkaConsumer``)."""
        consumer = self._consumer
        return consumer.levels if isinstance(consumer, PriorityConsumer) else ONE_LEVEL

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> Mapping[TopicPartition, list[Any]]:
        """The consumer's ``poll``, at least JOIN_POLL_MS long while the group joins."""
        consumer = self._consumer
        if self._joining and timeout_ms < JOIN_POLL_MS:
            timeout_ms = JOIN_POLL_MS
        release_parked_records(consumer)
        if max_records is None:
            batch = poll_through_lost_connections(consumer, timeout_ms=timeout_ms)
        else:
            batch = poll_through_lost_connections(consumer, timeout_ms=timeout_ms,
                                                  max_records=max_records)
        keep_pending_join(consumer)
        return batch or {}

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        """Subscribe the consumer; ``listener`` runs after the client's own join watch."""
        self._consumer.subscribe(
            topics=list(topics), pattern=pattern, listener=ChainedListener(self, listener)
        )
        self._joining = True

    # The join watch, run first by the ChainedListener of subscribe().

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        # Eager: the partitions are still assigned and the group rejoins now. Cooperative:
        # kafka-python already took them out of the assignment, and no join is pending.
        if self._closing:
            return
        kept = partitions & self._consumer.assignment()
        if kept:
            self._joining = True
            self._kept |= kept

    async def lost(self, partitions: set[TopicPartition]) -> None:
        return None

    async def assigned(self, partitions: set[TopicPartition]) -> None:
        # An empty assignment (the group joined before the topic's metadata arrived) is
        # followed by another rejoin: keep waiting for it as for a join.
        self._joining = not partitions
        # What the executor takes on must start at the group's commit, not where this member
        # was when it revoked (see _membership).
        back, self._kept = partitions & self._kept, set()
        for member, group in self._members(back).items():
            forget_kept_positions(member, group)

    def pause(self, *partitions: TopicPartition) -> None:
        self._consumer.pause(*kafka_partitions(partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        self._consumer.resume(*kafka_partitions(partitions))

    def paused(self) -> set[TopicPartition]:
        return self._consumer.paused()

    def assignment(self) -> set[TopicPartition]:
        return self._consumer.assignment()

    def subscription(self) -> set[str] | None:
        return self._consumer.subscription()

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._consumer.seek(TopicPartition(*partition), offset)

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """The consumer's ``commit``, at most ``commit_timeout_ms`` long (KafkaTimeoutError)."""
        try:
            self._consumer.commit(kafka_offsets(offsets), timeout_ms=self._commit_timeout_ms)
        except OffsetMetadataTooLargeError as exc:
            raise MetadataTooLarge(str(exc)) from exc

    def fetch_committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The commits of ``partitions``, within COMMITTED_TIMEOUT_MS together (kafka-python's
        own wait has no end while the coordinator cannot be reached): KafkaTimeoutError."""
        found = {}
        deadline = time.monotonic() + COMMITTED_TIMEOUT_MS / 1000
        for tp in partitions:  # kafka-python asks one partition at a time
            left_ms = max(1, int((deadline - time.monotonic()) * 1000))
            committed = self._consumer.committed(
                TopicPartition(*tp), metadata=True, timeout_ms=left_ms)
            if committed is not None and committed.offset >= 0:
                found[tp] = committed
        return found

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Any:
        return self._consumer.commit_async(kafka_offsets(offsets))

    def commit_in_background(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Future:
        """``commit_async``: kafka-python's IO thread sends it and takes the answer, so the
        polling thread goes on polling (a blocking ``commit`` held it for every level's round
        trip, 0.3-1.5 s under load, during which nothing was polled). The answer comes from
        the commit's callback, not its future: with the coordinator unknown, kafka-python
        returns the coordinator lookup's future, done before the commit is even sent."""
        answer = Future()

        def answered(_offsets: Any, response: Any) -> None:
            # On the polling thread, from inside a later poll.
            if not isinstance(response, BaseException):
                answer.success(None)
            elif isinstance(response, OffsetMetadataTooLargeError):
                too_large = MetadataTooLarge(str(response))
                too_large.__cause__ = response
                answer.failure(too_large)
            else:
                answer.failure(response)

        try:
            self._consumer.commit_async(kafka_offsets(offsets), callback=answered)
        except Exception as exc:  # refused before it was sent: the next commit tries again
            answer.failure(exc)
        return answer

    def close(self) -> None:
        """Close the consumer within ``commit_timeout_ms`` (kafka-python's own bound is its
        ``request_timeout_ms``, 305 s by default, for a coordinator that does not answer)."""
        self._closing = True
        self._consumer.close(timeout_ms=self._commit_timeout_ms)

    def transactions(self, producer: Any, owned: bool = False) -> KafkaTransactions:
        """See :meth:`ClientConsumer.transactions`: a kafka-python ``KafkaProducer`` with a
        ``transactional_id``."""
        return KafkaTransactions(producer, owned)

    def transaction_groups(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> list[tuple[Any, dict[TopicPartition, OffsetAndMetadata]]]:
        """See :meth:`ClientConsumer.transaction_groups`. CommitFailedError for a subscribed
        member with no generation (kafka-python resets it when the group refuses the member,
        until the member has joined again): the broker takes offsets sent with no generation
        as a non-member's and fences nothing, so a member that lost its partitions would
        commit over their new owner's."""
        return [(_membership(member), {tp: offsets[tp] for tp in group})
                for member, group in self._members(offsets).items()]

    def rejoin_refused(
        self, error: BaseException, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> bool:
        """See :meth:`ClientConsumer.rejoin_refused`: kafka-python raises CommitFailedError
        for a refused member id or generation (KIP-447), and its heartbeat would see it only
        at its next beat (heartbeat_interval_ms, or the coordinator's rediscovery). The member
        drops its generation (:func:`drop_refused_membership`): its partitions are lost."""
        if not isinstance(error, CommitFailedError) or not offsets:
            return False
        for member in self._members(offsets):
            drop_refused_membership(member, error)
        return True

    def _members(self, partitions: Iterable[TopicPartition]) -> dict[Any, set[TopicPartition]]:
        """The kafka-python consumer that is the group member of each of ``partitions`` (a
        PriorityConsumer's: its level's)."""
        consumer = self._consumer
        members: dict[Any, set[TopicPartition]] = {}
        for tp in partitions:
            member = consumer if isinstance(consumer, KafkaConsumer) else consumer._consumer_of(tp)
            members.setdefault(member, set()).add(tp)
        return members

    def dead_letter_producer(self, given: Any) -> Callable[[], DeadLetterSender]:
        """See :meth:`ClientConsumer.dead_letter_producer`; None: a producer of our own that
        connects as the consumer does (security settings included)."""
        return kafka_dead_letters(given, lambda: self._connection())

    def _connection(self) -> dict[str, Any]:
        consumer = self._consumer
        configs = getattr(consumer, "connection_configs", None)  # a PriorityConsumer's
        if not isinstance(configs, Mapping):
            configs = connection_configs(consumer.config)  # KafkaConsumer.config: its settings
        if not configs.get("bootstrap_servers"):
            raise ConfigError(
                "pass 'dead_letter_producer': failure_policy 'dead_letter' needs a producer and "
                f"the consumer {consumer!r} does not expose bootstrap_servers."
            )
        return dict(configs)

    def __repr__(self) -> str:
        return f"KafkaClient({self._consumer!r})"


def _membership(member: KafkaConsumer) -> Any:
    """``member``'s group metadata for a transaction's offsets (see
    :meth:`KafkaClient.transaction_groups`)."""
    metadata = member.group_metadata()
    if metadata.generation_id < 0 and member.subscription():
        raise CommitFailedError(
            f"group {metadata.group_id!r}: the member has no generation (the group refused it "
            f"and it has not joined again); offsets sent now would not be fenced"
        )
    return metadata
