"""The kafka-python transactional producer adapter against the real broker: a transaction the
broker ended (past its timeout) and kafka-python's own epoch bump (KIP-360)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition

from priority_kafka import Output
from priority_kafka.kafka_python._transactions import KafkaTransactions
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
