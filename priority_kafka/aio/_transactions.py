"""The exactly-once executor's transactional producer on aiokafka, and why it is not KIP-447.

aiokafka's ``AIOKafkaProducer`` with a ``transactional_id`` fences the earlier holder of that
id when it starts (``InitProducerId``) and has ``begin_transaction``, ``send``,
``send_offsets_to_transaction(offsets, group_id)``, ``commit_transaction`` and
``abort_transaction``. Its ``send_offsets_to_transaction`` takes a group id only, not a
member's group metadata (generation and member id, KIP-447), so the broker cannot refuse the
offsets of a member that a rebalance already replaced: a consumer that lost its partitions and
has not noticed yet can still commit a transaction for them, and their next owner processes
the same records again. Exactly-once therefore holds on aiokafka only while the group does not
move partitions between live members (one member per group, or static membership with no
session expiry) or with one transactional id per input partition (the pre-KIP-447 model);
docs/asyncio.md says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaProducer

from priority_kafka._structs import OffsetAndMetadata, TopicPartition
from priority_kafka.aio._bridge import BridgedProducer, call
from priority_kafka.aio._records import aio_offsets
from priority_kafka.errors import ConfigError

__all__ = ["AioTransactions", "bridged"]


def bridged(producer: Any) -> BridgedProducer:
    """``producer`` (the family's ``producer()``, or a started ``AIOKafkaProducer``) driven
    across the bridge; ConfigError naming the setting for anything else or a producer
    without a ``transactional_id``."""
    if isinstance(producer, AIOKafkaProducer):
        producer = BridgedProducer(producer)
    if not isinstance(producer, BridgedProducer):
        raise ConfigError(
            f"'transactional_producer' must be an aiokafka AIOKafkaProducer with a "
            f"transactional_id (got {producer!r})."
        )
    if producer.producer._txn_manager is None or not getattr(
            producer.producer._txn_manager, "transactional_id", None):
        raise ConfigError(
            f"'transactional_producer' must have a transactional_id (got {producer!r})."
        )
    return producer


class AioTransactions:
    """A :class:`~priority_kafka._types.TransactionalSender` over an aiokafka producer."""

    __slots__ = ("_owned", "_producer")

    def __init__(self, producer: BridgedProducer, owned: bool = False) -> None:
        self._producer = producer
        self._owned = owned

    def _call(self, coroutine: Any) -> Any:
        return call(self._producer.loop, coroutine)

    def init(self) -> None:
        """Nothing more: the producer fenced the earlier holder of its id when it started."""

    def begin(self) -> None:
        self._call(self._producer.producer.begin_transaction())

    def send(self, output: Any) -> None:
        self._call(self._producer.producer.send(
            output.topic, value=output.value, key=output.key,
            headers=list(output.headers) or None, partition=output.partition,
        ))

    def send_offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_metadata: Any
    ) -> None:
        """``group_metadata`` is the group id (AioClient.transaction_groups)."""
        self._call(self._producer.producer.send_offsets_to_transaction(
            aio_offsets(offsets), group_metadata
        ))

    def commit(self) -> None:
        self._call(self._producer.producer.commit_transaction())

    def abort(self) -> None:
        self._call(self._producer.producer.abort_transaction())

    def close(self) -> None:
        if self._owned:
            self._producer.close()
