"""The exactly-once executor's transactional producer on kafka-python 3 (KIP-447).

kafka-python 3's ``KafkaProducer`` with a ``transactional_id`` has the whole transaction API
(``init_transactions``, ``begin_transaction``, ``send_offsets_to_transaction`` with a
consumer's ``group_metadata()``, so a member fenced by a rebalance cannot commit offsets,
``commit_transaction``, ``abort_transaction``); each call waits for the broker, retrying what
is retriable. Several consumer groups' offsets may go into one transaction (one
``send_offsets_to_transaction`` per group), which is how a PriorityConsumer's levels, one group
each, commit together.

kafka-python answers a produce refused for its producer epoch or sequence
(``InvalidProducerEpoch``, ``UnknownProducerId``, ``OutOfOrderSequenceNumber``: KIP-360) by
bumping the epoch itself, which ends the open transaction on the broker; while it does,
``abort_transaction()`` is refused (an invalid state transition), and once it is done there is
no transaction left to abort (the producer is ready for the next). :meth:`KafkaTransactions.abort`
waits the bump out, and aborts only a transaction still open.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kafka.producer.transaction_manager import TransactionState

from priority_kafka.errors import ConfigError, TransactionError
from priority_kafka.kafka_python._kafka import (
    KafkaProducer,
    OffsetAndMetadata,
    TopicPartition,
    kafka_offsets,
)

__all__ = ["KafkaTransactions"]

#: How long the queued outputs may take to be delivered before the commit.
_FLUSH_TIMEOUT_S = 120
#: How long closing a producer the executor built may take (a fenced one has nothing to send).
_CLOSE_TIMEOUT_S = 10
#: How often an abort looks whether kafka-python's own epoch bump is over: the transaction
#: manager signals no event for it.
_BUMP_POLL_S = 0.01


class KafkaTransactions:
    """A kafka-python ``KafkaProducer`` with a ``transactional_id`` as a TransactionalSender."""

    __slots__ = ("_futures", "_owned", "_producer")

    def __init__(self, producer: Any, owned: bool = False) -> None:
        if not isinstance(producer, KafkaProducer) or not producer.config.get("transactional_id"):
            raise ConfigError(
                "'transactional_producer' must be a kafka-python KafkaProducer with a "
                f"transactional_id for a kafka-python consumer (got {producer!r})."
            )
        self._producer = producer
        self._owned = owned
        self._futures: list[Any] = []

    def __repr__(self) -> str:
        return f"KafkaTransactions({self._producer.config['transactional_id']!r})"

    def init(self) -> None:
        self._producer.init_transactions()

    def begin(self) -> None:
        self._futures.clear()
        self._producer.begin_transaction()

    def send(self, output: Any) -> None:
        self._futures.append(self._producer.send(
            output.topic, value=output.value, key=output.key,
            headers=list(output.headers) or None, partition=output.partition,
        ))

    def send_offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_metadata: Any
    ) -> None:
        self._producer.send_offsets_to_transaction(kafka_offsets(offsets), group_metadata)

    def commit(self) -> None:
        self._producer.flush(timeout=_FLUSH_TIMEOUT_S)
        for future in self._futures:  # a send that failed fails the transaction
            future.get(timeout=0)
        self._producer.commit_transaction()

    def abort(self) -> None:
        self._futures.clear()
        manager = self._producer._transaction_manager
        if _no_transaction_open(manager, self._producer.config["max_block_ms"] / 1000):
            return
        self._producer.abort_transaction()

    def close(self) -> None:
        if self._owned:  # a caller's producer stays open: its owner closes it
            self._producer.close(timeout=_CLOSE_TIMEOUT_S)


def _no_transaction_open(manager: Any, timeout_s: float) -> bool:
    """Whether the producer has no transaction to abort: kafka-python bumped its epoch
    (KIP-360), which ended the transaction on the broker. A bump under way is waited out,
    up to ``timeout_s``."""
    bumping = getattr(manager, "is_bumping_epoch", None)  # kafka-python releases with KIP-360
    deadline = time.monotonic() + timeout_s
    while bumping is not None and bumping():
        if time.monotonic() > deadline:
            raise TransactionError(
                f"the producer's epoch bump (KIP-360) took over {timeout_s:g} s (max_block_ms)"
            )
        time.sleep(_BUMP_POLL_S)
    return bool(manager._current_state == TransactionState.READY)
