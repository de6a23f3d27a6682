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

More differences from Java's producer are worked around here: kafka-python's sender drops a
transactional request whose coordinator connection failed as it was being readied
(:data:`DROPS_REQUEST_ON_COORDINATOR_DISCONNECT`), it sends an aborted transaction's refused
offsets again with a later one (:data:`KEEPS_REFUSED_TXN_OFFSETS`), and its transaction calls
wait without a bound, where Java's wait ``max.block.ms``: every call here waits at most
``max_block_ms`` and then fails with :class:`~priority_kafka.errors.TransactionError` naming
the call, so the executor aborts or renews its producer instead of hanging.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kafka.errors import KafkaConnectionError, KafkaTimeoutError, RequestTimedOutError
from kafka.producer.transaction_manager import TransactionalRequestResult, TransactionState

from priority_kafka.config import INIT_TRANSACTIONS_RETRY_S
from priority_kafka.errors import ConfigError, TransactionError
from priority_kafka.kafka_python._kafka import (
    KAFKA_PYTHON_VERSION,
    Future,
    KafkaProducer,
    OffsetAndMetadata,
    TopicPartition,
    kafka_offsets,
)

__all__ = [
    "DROPS_REQUEST_ON_COORDINATOR_DISCONNECT",
    "KEEPS_REFUSED_TXN_OFFSETS",
    "TIMED_OUT_REQUEST_FATAL",
    "KafkaTransactions",
]

#: kafka-python's sender readies a transactional request's coordinator with ``await_ready``,
#: which raises when the connection fails; the ``except`` branch looks the coordinator up
#: again but re-enqueues the request only ``if target_node is None``, and the node is set by
#: then (Java's sender retries it unconditionally). The request is dropped and its call
#: (``send_offsets_to_transaction``, ``commit_transaction``...) waits forever: the chaos soak's
#: exactly-once members stopped for good in ``send_offsets_to_transaction`` after a
#: coordinator's node was shut down. The sender is given a client whose ``await_ready``
#: answers False instead, the branch that re-enqueues. Verified on 3.0.12; proof:
#: tests/test_kafka_transactions.py::test_a_request_whose_coordinator_drops_is_sent_again.
DROPS_REQUEST_ON_COORDINATOR_DISCONNECT = KAFKA_PYTHON_VERSION >= (3, 0)

#: A transactional request that gets no answer within ``request_timeout_ms`` (a coordinator's
#: node cut off or overloaded) fails with RequestTimedOutError, which the request handler takes
#: for an error "for unknown reasons": the producer's state becomes fatal, where a disconnect
#: (KafkaConnectionError) is retried after looking the coordinator up again. Java's client
#: treats a request timeout as a disconnect. In the chaos soak a kafka-python exactly-once
#: member started during a cut-off died in ``init_transactions``. The sender is given a client
#: whose timed-out requests fail as disconnects. Verified on 3.0.12; proof:
#: tests/test_kafka_transactions.py::test_a_transactional_request_that_times_out_is_sent_again.
TIMED_OUT_REQUEST_FATAL = KAFKA_PYTHON_VERSION >= (3, 0)

#: The offsets of a TxnOffsetCommit the broker refused stay in the transaction manager's one
#: pending map (``_pending_txn_offset_commits``, never cleared) after the transaction is
#: aborted, and every later ``send_offsets_to_transaction`` sends the whole map, whatever its
#: group: the aborted transaction's offsets are committed by a later one, into the group it
#: names (a level's group got another level's partitions in the chaos soak), so the records
#: between the last real commit and those offsets, whose outputs were aborted, are skipped by
#: the next owner: exactly-once outputs missing (3,549 in a 6-minute soak). The map is emptied
#: as each transaction begins. Verified on 3.0.12; proof:
#: tests/test_kafka_transactions.py::test_an_aborted_transactions_offsets_are_not_sent_again.
KEEPS_REFUSED_TXN_OFFSETS = KAFKA_PYTHON_VERSION >= (3, 0)

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
        if DROPS_REQUEST_ON_COORDINATOR_DISCONNECT or TIMED_OUT_REQUEST_FATAL:
            sender = producer._sender
            if not isinstance(sender._client, _SenderClient):
                sender._client = _SenderClient(sender._client)

    def __repr__(self) -> str:
        return f"KafkaTransactions({self._producer.config['transactional_id']!r})"

    def init(self) -> None:
        # kafka-python gives up after max_block_ms; a call after its timeout waits for the
        # same request again. Up to INIT_TRANSACTIONS_RETRY_S, as the confluent family.
        deadline = time.monotonic() + INIT_TRANSACTIONS_RETRY_S
        while True:
            try:
                self._producer.init_transactions()
                return
            except KafkaTimeoutError:
                if time.monotonic() >= deadline:
                    raise

    def begin(self) -> None:
        self._futures.clear()
        if KEEPS_REFUSED_TXN_OFFSETS:
            manager = self._producer._transaction_manager
            with manager._lock:
                manager._pending_txn_offset_commits.clear()
        self._producer.begin_transaction()

    def send(self, output: Any) -> None:
        self._futures.append(self._producer.send(
            output.topic, value=output.value, key=output.key,
            headers=list(output.headers) or None, partition=output.partition,
        ))

    def send_offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_metadata: Any
    ) -> None:
        manager = self._producer._transaction_manager
        self._wait("send_offsets_to_transaction",
                   manager.send_offsets_to_transaction(kafka_offsets(offsets), group_metadata))

    def commit(self) -> None:
        self._producer.flush(timeout=_FLUSH_TIMEOUT_S)
        for future in self._futures:  # a send that failed fails the transaction
            future.get(timeout=0)
        self._wait("commit_transaction", self._producer._transaction_manager.begin_commit())

    def abort(self) -> None:
        self._futures.clear()
        manager = self._producer._transaction_manager
        if _no_transaction_open(manager, self._producer.config["max_block_ms"] / 1000):
            return
        self._wait("abort_transaction", manager.begin_abort())

    def close(self) -> None:
        if self._owned:  # a caller's producer stays open: its owner closes it
            self._producer.close(timeout=_CLOSE_TIMEOUT_S)

    def _wait(self, call: str, result: TransactionalRequestResult) -> None:
        """What ``KafkaProducer.<call>`` does after starting the request, bounded as Java's."""
        self._producer._sender.wakeup()
        max_block_ms = self._producer.config["max_block_ms"]
        if not result.wait(timeout_ms=max_block_ms):  # raises the request's error
            raise TransactionError(f"{call} got no answer in {max_block_ms} ms (max_block_ms)")


class _SenderClient:
    """kafka-python's client as its sender sees it: ``await_ready`` answers False for a node
    that cannot be readied (see :data:`DROPS_REQUEST_ON_COORDINATOR_DISCONNECT`), and a request
    that timed out fails as a disconnect (see :data:`TIMED_OUT_REQUEST_FATAL`)."""

    __slots__ = ("_client",)

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def await_ready(self, node_id: Any, timeout_ms: int = 30000) -> bool:
        try:
            return bool(self._client.await_ready(node_id, timeout_ms=timeout_ms))
        except KafkaConnectionError:
            if not DROPS_REQUEST_ON_COORDINATOR_DISCONNECT:
                raise
            return False

    def send(self, node_id: Any, request: Any, **kwargs: Any) -> Any:
        sent = self._client.send(node_id, request, **kwargs)
        if not TIMED_OUT_REQUEST_FATAL:
            return sent
        relayed = Future()
        sent.add_callback(relayed.success)
        sent.add_errback(lambda error: relayed.failure(
            KafkaConnectionError(f"no answer: {error}")
            if isinstance(error, RequestTimedOutError) else error))
        return relayed


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
