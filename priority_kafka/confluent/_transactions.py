"""The exactly-once executor's transactional producer on confluent-kafka (KIP-447).

A ``confluent_kafka.Producer`` with ``transactional.id``: ``init_transactions``,
``begin_transaction``, ``send_offsets_to_transaction`` with a consumer's
``consumer_group_metadata()`` (so a member fenced by a rebalance cannot commit offsets),
``commit_transaction``, ``abort_transaction``. librdkafka accepts several groups' offsets in
one transaction (one call per group): a PriorityConsumer's levels, one group each, commit
together. A retriable error of the commit (a timeout, a coordinator moving) is retried, as
librdkafka's documentation asks; an error that requires an abort is left to :meth:`abort`; a
fatal one (fenced by a newer producer with the same id) makes :meth:`abort` raise.

Each call runs on a helper thread, waited for at most the executor's ``commit_timeout_ms``: a
producer whose handle lost every broker (librdkafka issue #5301, as a broker restart can
leave it) blocks in ``send_offsets_to_transaction`` or ``commit_transaction`` for ever,
whatever timeout it was given, and with it the executor's polling thread, every level
stalled without a word. Past that bound the call raises TimeoutError and is left running;
the handle is not called again (its abort raises at once), so the executor's abort fails and,
given a factory, it goes on with a new producer, whose ``init_transactions`` fences the stuck
one and aborts its transaction.

A call that keeps failing with a retriable error (librdkafka's own timeout: "retry call to
resume") is retried within the same ``commit_timeout_ms`` in all, not longer: in the chaos
soak an abort whose request librdkafka kept queued for a transaction coordinator that had been
cut off and came back was retried for 300 s, then the producer's close waited 60 s more, and
the members were past ``max.poll.interval.ms`` and lost their partitions, 6 minutes without a
record handled. An abort that failed leaves the producer to be closed in the background.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition

from priority_kafka._structs import OffsetAndMetadata, TopicPartition
from priority_kafka.config import DEFAULT_COMMIT_TIMEOUT_MS, INIT_TRANSACTIONS_RETRY_S
from priority_kafka.confluent._bounded import BlockingCall, close_within
from priority_kafka.errors import ConfigError

__all__ = ["ConfluentTransactions", "confluent_offsets"]

log = logging.getLogger(__name__)

#: Each transactional call's own timeout (at most; librdkafka's requests may still take up to
#: ``socket.timeout.ms``); a retriable failure is retried within the limit, after a pause that
#: grows from _BACKOFF_S to _MAX_BACKOFF_S (an error that comes back at once, a coordinator
#: loading, must not spin the polling thread).
_CALL_TIMEOUT_S = 30
_BACKOFF_S, _MAX_BACKOFF_S = 0.05, 1.0


class ConfluentTransactions:
    """A ``confluent_kafka.Producer`` with ``transactional.id`` as a TransactionalSender."""

    __slots__ = ("_abandoned", "_bounded", "_errors", "_limit_s", "_owned", "_producer")

    def __init__(
        self, producer: Any, owned: bool = False,
        limit_s: float = DEFAULT_COMMIT_TIMEOUT_MS / 1000,
    ) -> None:
        """``limit_s``: how long one call may block before it counts as stuck (the
        executor's ``commit_timeout_ms``)."""
        if not isinstance(producer, Producer):
            raise ConfigError(
                "'transactional_producer' must be a confluent_kafka.Producer with a "
                f"transactional.id for a confluent consumer (got {producer!r})."
            )
        self._producer = producer
        self._owned = owned
        self._limit_s = limit_s
        self._bounded = BlockingCall("the transactional producer")
        self._errors: list[Any] = []
        #: Its abort failed: its close (which aborts first) would block as the abort did.
        self._abandoned = False

    def __repr__(self) -> str:
        return f"ConfluentTransactions({self._producer!r})"

    def init(self) -> None:
        self._retrying("init_transactions", self._producer.init_transactions,
                       INIT_TRANSACTIONS_RETRY_S)

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
        positions = confluent_offsets(offsets)
        self._retrying("send_offsets_to_transaction", lambda timeout: (
            self._producer.send_offsets_to_transaction(positions, group_metadata, timeout)
        ))

    def commit(self) -> None:
        self._retrying("commit_transaction", self._producer.commit_transaction)
        if self._errors:  # librdkafka fails the commit itself then; be sure
            raise KafkaException(self._errors[0])

    def abort(self) -> None:
        self._errors.clear()
        try:
            self._retrying("abort_transaction", self._producer.abort_transaction)
        except BaseException:
            self._abandoned = True
            raise

    def close(self) -> None:
        if not self._owned:  # a caller's producer stays open: its owner closes it
            return
        # A stuck handle's close would block as its call does: not waited for.
        stuck = self._abandoned or self._bounded.blocked_s() is not None
        for exc in close_within([("the transactional producer", self._producer.close)],
                                0 if stuck else self._limit_s):
            # Closed all the same after a fatal error: close() aborts the open transaction
            # first, and a fenced producer raises its fatal error for that.
            if not (isinstance(exc, KafkaException) and exc.args[0].fatal()):
                raise exc

    def _retrying(
        self, name: str, call: Callable[[float], Any], window_s: float | None = None,
    ) -> None:
        """``call(timeout)`` (librdkafka's ``name``) within the limit, again while it fails
        with a retriable error, all within ``window_s`` (default: the limit), each retry
        logged as a warning."""
        _retrying(name, lambda: self._bounded(
            lambda: call(min(_CALL_TIMEOUT_S, self._limit_s)), self._limit_s),
            self._limit_s if window_s is None else window_s)


def confluent_offsets(
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
) -> list[ConfluentPartition]:
    """``offsets`` as librdkafka takes them to commit (metadata "" when there is none)."""
    return [
        ConfluentPartition(tp.topic, tp.partition, meta.offset, meta.metadata or "")
        for tp, meta in offsets.items()
    ]


def _retrying(name: str, call: Callable[[], Any], window_s: float) -> None:
    """Run ``call`` (librdkafka's ``name``), again while it fails with a retriable error, as
    long as ``window_s`` has not passed since the first call, each retry logged as a warning.
    TimeoutError (a call past its limit, left running) is raised naming ``name``."""
    deadline = time.monotonic() + window_s
    backoff = _BACKOFF_S
    while True:
        try:
            call()
            return
        except TimeoutError as exc:
            raise TimeoutError(f"{name}: {exc}") from None
        except KafkaException as exc:
            error = exc.args[0]
            if not error.retriable() or error.txn_requires_abort() or error.fatal() or (
                time.monotonic() > deadline
            ):
                raise
            log.warning("%s failed, retrying in %g s: %s", name, backoff, error.str())
            time.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
