"""The exactly-once executor's transactional producer on confluent-kafka (KIP-447).

A ``confluent_kafka.Producer`` with ``transactional.id``: ``init_transactions``,
``begin_transaction``, ``send_offsets_to_transaction`` with a consumer's
``consumer_group_metadata()`` (so a member fenced by a rebalance cannot commit offsets),
``commit_transaction``, ``abort_transaction``. librdkafka accepts several groups' offsets in
one transaction (one call per group): a PriorityConsumer's levels, one group each, commit
together. A retriable error of the commit (a timeout, a coordinator moving) is retried, as
librdkafka's documentation asks; an error that requires an abort is left to :meth:`abort`; a
fatal one (fenced by a newer producer with the same id) makes :meth:`abort` raise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition

from priority_kafka._structs import OffsetAndMetadata, TopicPartition
from priority_kafka.errors import ConfigError

__all__ = ["ConfluentTransactions"]

log = logging.getLogger(__name__)

#: Each transactional call's own timeout; a retriable failure is retried until _RETRY_S,
#: after a pause that grows from _BACKOFF_S to _MAX_BACKOFF_S (an error that comes back at
#: once, a coordinator loading, must not spin the polling thread).
_CALL_TIMEOUT_S = 30
_RETRY_S = 300
_BACKOFF_S, _MAX_BACKOFF_S = 0.05, 1.0


class ConfluentTransactions:
    """A ``confluent_kafka.Producer`` with ``transactional.id`` as a TransactionalSender."""

    __slots__ = ("_errors", "_owned", "_producer")

    def __init__(self, producer: Any, owned: bool = False) -> None:
        if not isinstance(producer, Producer):
            raise ConfigError(
                "'transactional_producer' must be a confluent_kafka.Producer with a "
                f"transactional.id for a confluent consumer (got {producer!r})."
            )
        self._producer = producer
        self._owned = owned
        self._errors: list[Any] = []

    def __repr__(self) -> str:
        return f"ConfluentTransactions({self._producer!r})"

    def init(self) -> None:
        _retrying("init_transactions", lambda: self._producer.init_transactions(_CALL_TIMEOUT_S))

    def begin(self) -> None:
        self._errors.clear()
        self._producer.begin_transaction()

    def send(self, output: Any) -> None:
        extra = {} if output.partition is None else {"partition": output.partition}
        while True:
            try:
                # Producer's own produce(): a SerializingProducer's would not take extra
                # arguments the same way; the caller's serializers are its own business.
                self._producer.produce(
                    output.topic, value=output.value, key=output.key,
                    headers=list(output.headers) or None, on_delivery=self._delivered,
                    **extra,
                )
                return
            except BufferError:  # the local queue is full: deliver some, then again
                self._producer.poll(0.1)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self._errors.append(error)

    def send_offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_metadata: Any
    ) -> None:
        positions = [
            ConfluentPartition(tp.topic, tp.partition, meta.offset, meta.metadata or "")
            for tp, meta in offsets.items()
        ]
        _retrying("send_offsets_to_transaction", lambda: self._producer.send_offsets_to_transaction(
            positions, group_metadata, _CALL_TIMEOUT_S
        ))

    def commit(self) -> None:
        _retrying("commit_transaction",
                  lambda: self._producer.commit_transaction(_CALL_TIMEOUT_S))
        if self._errors:  # librdkafka fails the commit itself then; be sure
            raise KafkaException(self._errors[0])

    def abort(self) -> None:
        self._errors.clear()
        _retrying("abort_transaction",
                  lambda: self._producer.abort_transaction(_CALL_TIMEOUT_S))

    def close(self) -> None:
        if self._owned:  # a caller's producer stays open: its owner closes it
            try:
                self._producer.close()
            except KafkaException as exc:
                if not exc.args[0].fatal():
                    raise
                # Closed all the same: close() aborts the open transaction first, and a
                # fenced producer raises its fatal error for that.


def _retrying(name: str, call: Callable[[], Any]) -> None:
    """Run ``call`` (librdkafka's ``name``), again while it fails with a retriable error, for up
    to _RETRY_S, each retry logged as a warning."""
    deadline = time.monotonic() + _RETRY_S
    backoff = _BACKOFF_S
    while True:
        try:
            call()
            return
        except KafkaException as exc:
            error = exc.args[0]
            if not error.retriable() or error.txn_requires_abort() or error.fatal() or (
                time.monotonic() > deadline
            ):
                raise
            log.warning("%s failed, retrying in %g s: %s", name, backoff, error.str())
            time.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
