"""The kafka-python transactional producer adapter against the real broker: a transaction the
broker ended (past its timeout), kafka-python's own epoch bump (KIP-360) and a coordinator
connection failing as a request is sent, a request that times out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaConnectionError, KafkaError, RequestTimedOutError
from kafka.future import Future
from kafka.structs import OffsetAndMetadata, TopicPartition

from priority_kafka import Output
from priority_kafka.kafka_python._kafka import keep_pending_join
from priority_kafka.kafka_python._transactions import TIMED_OUT_REQUEST_FATAL, KafkaTransactions
from tests.test_executor import create_topic
from tests.test_executor_exactly_once import read_committed

pytestmark = pytest.mark.integration


def in_a_transaction(
    bootstrap_servers: str, unique_name: Callable[[str], str], **config: Any
) -> tuple[str, KafkaProducer, KafkaTransactions]:
    """A new one-partition topic, and a producer in a transaction that wrote b"first" to it."""
    topic = unique_name("bump")
    create_topic(bootstrap_servers, topic, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers,
                             transactional_id=unique_name("tx"), **config)
    sender = KafkaTransactions(producer)
    sender.init()
    sender.begin()
    sender.send(Output(topic, value=b"first"))
    producer.flush()
    return topic, producer, sender


def test_a_transaction_the_broker_aborted_is_aborted_and_the_next_one_commits(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    """The broker aborts a transaction open past its timeout and fences its epoch; the next
    send is refused (InvalidProducerEpoch), kafka-python bumps the epoch itself (which ends the
    transaction), and the abort that follows must neither fail nor be fatal: the producer
    goes on with its next transaction (a member of an exactly-once executor, frozen past it,
    stopped with an 'Invalid transition' error here)."""
    topic, producer, sender = in_a_transaction(bootstrap_servers, unique_name,
                                               transaction_timeout_ms=1000)
    tp = TopicPartition(topic, 0)
    ends = KafkaConsumer(bootstrap_servers=bootstrap_servers)
    try:
        deadline = time.monotonic() + 30
        while ends.end_offsets([tp])[tp] < 2:  # the broker's abort marker follows the record
            assert time.monotonic() < deadline, "the broker did not abort the timed-out transaction"
            time.sleep(0.1)
        sender.send(Output(topic, value=b"second"))
        with pytest.raises(Exception, match="InvalidProducerEpoch"):
            sender.commit()
        sender.abort()
        sender.begin()
        sender.send(Output(topic, value=b"third"))
        sender.commit()
    finally:
        ends.close()
        producer.close()
    assert read_committed(bootstrap_servers, topic, 1) == {b"third": 1}


@pytest.mark.parametrize("bump_over", [False, True], ids=["bump-under-way", "bump-over"])
def test_an_abort_during_or_after_kafka_pythons_epoch_bump_ends_the_transaction(
    bootstrap_servers: str, unique_name: Callable[[str], str], bump_over: bool
) -> None:
    """kafka-python's sender bumps the epoch on a produce refused for its epoch or sequence;
    whether the abort comes while the bump is under way or after it, the transaction's
    records are not committed and the next transaction is."""
    topic, producer, sender = in_a_transaction(bootstrap_servers, unique_name)
    try:
        manager = producer._transaction_manager
        # What kafka-python's sender does on such an error, from its own thread: wake it.
        manager.bump_producer_id_and_epoch()
        producer._sender.wakeup()
        deadline = time.monotonic() + 30
        while bump_over and manager.is_bumping_epoch():
            assert time.monotonic() < deadline, "the epoch bump did not end"
            time.sleep(0.01)
        sender.abort()
        sender.begin()
        sender.send(Output(topic, value=b"second"))
        sender.commit()
    finally:
        producer.close()
    assert read_committed(bootstrap_servers, topic, 1) == {b"second": 1}


def drop_the_next_coordinator_connection(producer: KafkaProducer) -> list[Any]:
    """Make the next ``await_ready`` of the producer's sender raise, as kafka-python's own does
    when the connection to the node fails while it is readied (a coordinator's node shut
    down); returns the nodes it was asked for."""
    client = producer._sender._client
    client = getattr(client, "_client", client)  # under priority_kafka's work-around
    asked: list[Any] = []
    real = client.await_ready

    def await_ready(node_id: Any, timeout_ms: int = 30000) -> bool:
        asked.append(node_id)
        if len(asked) == 1:
            raise KafkaConnectionError(f"Node {node_id} not ready after {timeout_ms} ms")
        return bool(real(node_id, timeout_ms=timeout_ms))

    client.await_ready = await_ready
    return asked


@pytest.mark.parametrize("worked_around", [False, True], ids=["kafka-python", "priority_kafka"])
def test_a_request_whose_coordinator_drops_is_sent_again(
    bootstrap_servers: str, unique_name: Callable[[str], str], worked_around: bool
) -> None:
    """kafka-python's sender drops a transactional request whose coordinator connection fails
    as it is readied (DROPS_REQUEST_ON_COORDINATOR_DISCONNECT): its call never returns. Under
    KafkaTransactions the request is sent again after the coordinator is looked up, and the
    transaction commits its offsets."""
    topic, producer, sender = in_a_transaction(bootstrap_servers, unique_name)
    group = unique_name("group")
    tp = TopicPartition(topic, 0)
    try:
        if not worked_around:
            producer._sender._client = producer._sender._client._client  # kafka-python's own
        asked = drop_the_next_coordinator_connection(producer)
        offsets = {tp: OffsetAndMetadata(1, "", -1)}
        if worked_around:
            sender.send_offsets(offsets, group)
            sender.commit()
        else:
            result = producer._transaction_manager.send_offsets_to_transaction(offsets, group)
            producer._sender.wakeup()
            assert not result.wait(timeout_ms=5000), "kafka-python sent the request again"
        assert asked, "the sender never readied a coordinator"
    finally:
        producer.close(timeout=5)
    if worked_around:
        assert read_committed(bootstrap_servers, topic, 1) == {b"first": 1}
        reader = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=group,
                               enable_auto_commit=False)
        try:
            assert reader.committed(tp) == 1
        finally:
            reader.close()


def time_out_the_next_request(producer: KafkaProducer) -> list[Any]:
    """Make the next request the producer's sender sends fail with RequestTimedOutError, as
    kafka-python's connection fails one unanswered within ``request_timeout_ms`` (a node cut
    off); returns the requests sent."""
    client = producer._sender._client
    client = getattr(client, "_client", client)  # under priority_kafka's work-around
    sent: list[Any] = []
    real = client.send

    def send(node_id: Any, request: Any, **kwargs: Any) -> Any:
        sent.append(request)
        if len(sent) == 1:
            return Future().failure(RequestTimedOutError("Request timed out after 30000 ms"))
        return real(node_id, request, **kwargs)

    client.send = send
    return sent


@pytest.mark.parametrize("worked_around", [False, True], ids=["kafka-python", "priority_kafka"])
def test_a_transactional_request_that_times_out_is_sent_again(
    bootstrap_servers: str, unique_name: Callable[[str], str], worked_around: bool
) -> None:
    """kafka-python makes its producer's state fatal when a transactional request times out
    (TIMED_OUT_REQUEST_FATAL): init_transactions fails "for unknown reasons" and the producer
    can do nothing more. Under KafkaTransactions the request is sent again, as after a
    disconnect, and the producer starts and commits."""
    topic = unique_name("timeout")
    create_topic(bootstrap_servers, topic, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers,
                             transactional_id=unique_name("tx"), max_block_ms=20_000)
    sender = KafkaTransactions(producer)
    try:
        if not worked_around:
            producer._sender._client = producer._sender._client._client  # kafka-python's own
        sent = time_out_the_next_request(producer)
        if not worked_around:
            with pytest.raises(KafkaError, match=r"unknown reasons.*RequestTimedOutError"):
                producer.init_transactions()
            assert producer._transaction_manager.has_fatal_error() == TIMED_OUT_REQUEST_FATAL
            return
        sender.init()
        assert len(sent) >= 2, "the timed-out request was not sent again"
        sender.begin()
        sender.send(Output(topic, value=b"after"))
        sender.commit()
    finally:
        producer.close(timeout=5)
    assert read_committed(bootstrap_servers, topic, 1) == {b"after": 1}


@pytest.mark.parametrize("worked_around", [False, True], ids=["kafka-python", "priority_kafka"])
def test_an_aborted_transactions_offsets_are_not_sent_again(
    bootstrap_servers: str, unique_name: Callable[[str], str], worked_around: bool
) -> None:
    """A transaction's offsets for group A are refused (a stale member: KIP-447) and it is
    aborted; the next transaction commits offsets for group B only. kafka-python sends the
    refused offsets again with B's (KEEPS_REFUSED_TXN_OFFSETS), so B gets a commit for A's
    partition; under KafkaTransactions, only what the transaction was given."""
    topic, producer, sender = in_a_transaction(bootstrap_servers, unique_name)
    create_topic(bootstrap_servers, topic + "-b", 1)
    group_a, group_b = unique_name("a"), unique_name("b")
    tp_a, tp_b = TopicPartition(topic, 0), TopicPartition(topic + "-b", 0)
    member = KafkaConsumer(topic, bootstrap_servers=bootstrap_servers, group_id=group_a,
                           enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 60
        while not member.assignment():  # group A has a member: a stale one is refused
            assert time.monotonic() < deadline, "the member did not join group A"
            member.poll(timeout_ms=100)
            # A fresh group joined before the topic's metadata rejoins, and kafka-python 3.0.12
            # forgets that rejoin after a short poll (FORGETS_PENDING_JOIN): it never joined
            # in 60 s once in CI.
            keep_pending_join(member)
        live = member.group_metadata()
        stale = live._replace(generation_id=live.generation_id + 7, member_id="gone")
        with pytest.raises(Exception, match=r"CommitFailed|Generation|UnknownMember"):
            sender.send_offsets({tp_a: OffsetAndMetadata(1, "", -1)}, stale)
        sender.abort()
        if worked_around:
            sender.begin()
        else:  # kafka-python's own begin, as a plain application calls it
            producer.begin_transaction()
        sender.send(Output(topic + "-b", value=b"second"))
        sender.send_offsets({tp_b: OffsetAndMetadata(1, "", -1)}, group_b)
        sender.commit()
    finally:
        member.close()
        producer.close(timeout=5)
    reader = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=group_b,
                           enable_auto_commit=False)
    try:
        assert reader.committed(tp_b) == 1
        assert reader.committed(tp_a) == (1 if not worked_around else None)
    finally:
        reader.close()
