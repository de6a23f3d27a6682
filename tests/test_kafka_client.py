"""The executor's client adapters: which one a consumer gets, kafka-python's join wait, and the
dead-letter path for a user's producer with serializers (no broker: nothing here connects)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.errors import CommitFailedError

from priority_kafka._types import Borrowed
from priority_kafka.errors import ConfigError
from priority_kafka.executor._clients import as_client
from priority_kafka.kafka_python._client import KafkaClient
from priority_kafka.kafka_python._dead_letters import _Reserializing, kafka_dead_letters
from priority_kafka.kafka_python._kafka import JOIN_POLL_MS
from tests.fakes import FakeConsumer

TP = TopicPartition("t", 0)
# Given, so neither client asks a broker for its version (nothing listens on port 1).
NO_BROKER = {"bootstrap_servers": "127.0.0.1:1", "api_version": (2, 5)}


class _Polled:
    """A kafka-python consumer as far as KafkaClient uses it: records the poll timeouts."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []
        self.listener: Any = None
        self.assigned: set[TopicPartition] = set()

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> dict[Any, Any]:
        self.timeouts.append(timeout_ms)
        return {}

    def subscribe(self, topics: Any = (), pattern: Any = None, listener: Any = None) -> None:
        self.listener = listener

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)


class _Sent:
    """A producer that records what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, Any]] = []
        self.closed = False

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Any = None) -> Any:
        self.sent.append((key, value))
        return None

    def close(self) -> None:
        self.closed = True


def test_each_family_gets_its_adapter_and_a_client_is_used_as_it_is() -> None:
    """kafka-python consumers get KafkaClient, confluent ones ConfluentClient; a fake with the
    client shape is itself; anything else is a TypeError naming what it lacks."""
    consumer = KafkaConsumer(**NO_BROKER)
    try:
        assert isinstance(as_client(consumer), KafkaClient)
        assert as_client(consumer).levels.reserved == {0: 1}
    finally:
        consumer.close()
    fake = FakeConsumer({TP: []})
    assert as_client(fake) is fake
    with pytest.raises(TypeError, match="lacks poll, pause"):
        as_client(object())
    shapeless = type("NoLevels", (FakeConsumer,), {"levels": None})({TP: []})
    with pytest.raises(TypeError, match=r"NoLevels.* lacks levels"):
        as_client(shapeless)
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from priority_kafka.confluent.executor import ConfluentClient

    plain = confluent_kafka.Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    try:
        assert isinstance(as_client(plain), ConfluentClient)
    finally:
        plain.close()


def test_kafka_client_polls_long_enough_while_the_group_joins() -> None:
    """From subscribe, and after an eager revoke, until partitions are assigned, a poll lasts at
    least JOIN_POLL_MS (kafka-python 3 completes a join only in such a poll); then as asked."""
    polled = _Polled()
    client = KafkaClient(polled)
    client.poll(timeout_ms=0)
    client.subscribe(["t"])
    client.poll(timeout_ms=0)
    asyncio.run(polled.listener.on_partitions_assigned({TP}))
    client.poll(timeout_ms=0)
    polled.assigned = {TP}
    asyncio.run(polled.listener.on_partitions_revoked({TP}))  # eager: still assigned
    client.poll(timeout_ms=5)
    asyncio.run(polled.listener.on_partitions_assigned(set()))  # empty: another rejoin follows
    client.poll(timeout_ms=5)
    assert polled.timeouts == [0, JOIN_POLL_MS, 0, JOIN_POLL_MS, JOIN_POLL_MS]


def test_dead_letters_check_at_once_and_build_later() -> None:
    """No producer and no connection, or a producer without send(), fail at construction."""

    def no_connection() -> dict[str, Any]:
        raise ConfigError("pass 'dead_letter_producer'")

    with pytest.raises(ConfigError, match="pass 'dead_letter_producer'"):
        kafka_dead_letters(None, no_connection)
    with pytest.raises(ConfigError, match=r"'dead_letter_producer' must have a send\("):
        kafka_dead_letters(object(), no_connection)
    given = _Sent()
    sender = kafka_dead_letters(given, no_connection)()
    assert isinstance(sender, Borrowed)
    sender.close()
    assert not given.closed  # the caller's producer: its owner closes it


def test_a_serializing_kafka_producer_gets_values_and_stored_bytes_go_around_it() -> None:
    """Stored bytes skip the user's serializers (through a producer of ours, closed with the
    executor); values a plain KafkaConsumer deserialized go to the user's producer."""
    users = KafkaProducer(**NO_BROKER, value_serializer=lambda v: str(v).encode())
    try:
        built = kafka_dead_letters(users, dict)
        ours = built()
        assert isinstance(ours, _Reserializing)
        assert ours._raw.config["value_serializer"] is None
        assert ours._raw.config["bootstrap_servers"] == "127.0.0.1:1"
        ours.close()
    finally:
        users.close(0)
    serializing, raw = _Sent(), _Sent()
    sender = _Reserializing(serializing, raw)
    sender.send("dlq", value=b"stored", key=None)
    sender.send("dlq", value={"n": 1}, key=b"k")
    assert raw.sent == [(None, b"stored")] and serializing.sent == [(b"k", {"n": 1})]
    sender.close()
    assert raw.closed and not serializing.closed


def test_a_subscribed_member_with_no_generation_sends_no_transaction_offsets() -> None:
    """The broker takes a transaction's offsets sent with no generation as a non-member's and
    fences nothing (KIP-447): a subscribed member whose generation kafka-python reset (the
    group refused it) must not send them, or it commits over its partitions' new owner. A
    consumer with assigned partitions and no subscription commits as a non-member by design."""
    offsets = {TP: OffsetAndMetadata(5, "", -1)}
    member = KafkaConsumer(group_id="g", **NO_BROKER)
    try:
        member.subscribe(["t"])
        assert member.group_metadata().generation_id == -1  # never joined: no broker here
        with pytest.raises(CommitFailedError, match="'g': the member has no generation"):
            KafkaClient(member).transaction_groups(offsets)
    finally:
        member.close(autocommit=False, timeout_ms=100)
    assigned = KafkaConsumer(group_id="g", **NO_BROKER)
    try:
        assigned.assign([TP])
        [(metadata, sent)] = KafkaClient(assigned).transaction_groups(offsets)
        assert (metadata.group_id, metadata.generation_id, sent) == ("g", -1, offsets)
    finally:
        assigned.close(autocommit=False, timeout_ms=100)


def test_a_partition_revoked_eagerly_and_assigned_back_starts_at_its_groups_commit() -> None:
    """kafka-python keeps a partition's position through an eager rebalance that assigns it
    back; Java's consumer starts it at the group's commit. A member that revoked with a
    generation the group had replaced (frozen past its session) so resumed below the commits
    of the partition's owner meanwhile. The executor's client makes it read the commit (the
    position missing, as for a new partition), keeping a pause; others keep theirs."""
    other = TopicPartition("t", 1)
    consumer = KafkaConsumer(group_id="g", **NO_BROKER)
    try:
        client = KafkaClient(consumer)
        consumer.subscribe(["t"])
        subscription = consumer._subscription
        subscription.assign_from_subscribed([TP, other])
        consumer.seek(TP, 42)
        consumer.seek(other, 7)
        consumer.pause(TP)
        asyncio.run(client.revoked({TP, other}))
        subscription.assign_from_subscribed([TP])  # as kafka-python's join completes
        asyncio.run(client.assigned({TP}))
        state = subscription.assignment[TP]
        assert state.is_missing_position() and state.paused
        subscription.assign_from_subscribed([TP, other])  # a later rebalance, not eager
        consumer.seek(TP, 50)
        asyncio.run(client.assigned({TP, other}))
        assert subscription.assignment[TP].position.offset == 50
    finally:
        consumer.close(autocommit=False, timeout_ms=100)  # no broker to leave


@pytest.mark.parametrize(("refused_for", "member_after"), [
    ("IllegalGenerationError", "member-1"), ("UnknownMemberIdError", ""),
])
def test_a_refused_membership_drops_the_generation_and_keeps_only_a_known_member_id(
    refused_for: str, member_after: str,
) -> None:
    """A transaction's offsets refused for the member's generation (IllegalGeneration): the
    group still knows the member, which rejoins with its id; refused for an unknown member:
    it rejoins as a new one. Either way it has no generation left (its partitions are lost,
    no commit is tried) and a rejoin is due."""
    from kafka.coordinator.base import Generation

    consumer = KafkaConsumer(group_id="g", **NO_BROKER)
    try:
        consumer.subscribe(["t"])
        coordinator = consumer._coordinator
        coordinator._generation = Generation(7, "member-1", "range")
        error = CommitFailedError("Transaction offset commit failed due to consumer group "
                                  f"metadata mismatch: {refused_for}")
        assert KafkaClient(consumer).rejoin_refused(error, {TP: OffsetAndMetadata(5, "", -1)})
        generation = coordinator._generation
        assert (generation.generation_id, generation.member_id) == (-1, member_after)
        assert coordinator.rejoin_needed
        assert not KafkaClient(consumer).rejoin_refused(RuntimeError("other"), {TP: None})
    finally:
        consumer.close(autocommit=False, timeout_ms=100)


def test_a_request_to_a_node_gone_from_the_metadata_fails_retriably() -> None:
    """A fetch for a partition whose leader the metadata no longer lists (a broker shut down)
    raised UnknownBrokerIdError out of kafka-python's send(), and so out of poll(): a soak
    member died of it. The library's clients fail the request as a node not ready (the fetch
    is retried) and ask for fresh metadata."""
    from kafka.errors import NodeNotReadyError

    from priority_kafka.kafka_python._net import AuthFailFastClient

    consumer = KafkaConsumer(**NO_BROKER, kafka_client=AuthFailFastClient)
    try:
        cluster = consumer._client.cluster
        cluster._need_update = False
        future = consumer._client._manager.send(object(), node_id=99)
        assert future.failed() and isinstance(future.exception, NodeNotReadyError)
        assert cluster._need_update
    finally:
        consumer.close(autocommit=False, timeout_ms=100)
