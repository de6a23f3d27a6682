"""The exactly-once executor's transactional producer on kafka-python 3 (KIP-447).

kafka-python 3's ``KafkaProducer`` with a ``transactional_id`` has the whole transaction API
(``init_transactions``, ``begin_transaction``, ``send_offsets_to_transaction`` with a
consumer's ``group_metadata()``, so a member fenced by a rebalance cannot commit offsets,
``commit_transaction``, ``abort_transaction``); each call waits for the broker, retrying what
is retriable. Several consumer groups' offsets may go into one transaction (one
``send_offsets_to_transaction`` per group), which is how a PriorityConsumer's levels, one group
each, commit together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from priority_kafka._kafka import KafkaProducer, OffsetAndMetadata, TopicPartition
from priority_kafka.errors import ConfigError

__all__ = ["KafkaTransactions"]

#: How long the queued outputs may take to be delivered before the commit.
_FLUSH_TIMEOUT_S = 120


class KafkaTransactions:
    """A kafka-python ``KafkaProducer`` with a ``transactional_id`` as a TransactionalSender."""

    __slots__ = ("_futures", "_producer")

    def __init__(self, producer: Any) -> None:
        if not isinstance(producer, KafkaProducer) or not producer.config.get("transactional_id"):
            raise ConfigError(
                "'transactional_producer' must be a kafka-python KafkaProducer with a "
                f"transactional_id for a kafka-python consumer (got {producer!r})."
            )
        self._producer = producer
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
        self._producer.send_offsets_to_transaction(dict(offsets), group_metadata)

    def commit(self) -> None:
        self._producer.flush(timeout=_FLUSH_TIMEOUT_S)
        for future in self._futures:  # a send that failed fails the transaction
            future.get(timeout=0)
        self._producer.commit_transaction()

    def abort(self) -> None:
        self._futures.clear()
        self._producer.abort_transaction()

    def close(self) -> None:
        return None  # the caller's producer: its owner closes it
