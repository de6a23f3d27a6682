"""Exactly-once commits: a handler's outputs and the offsets that cover them, in one transaction.

Under exactly-once, each commit of the executor (periodic, on revoke, on stop) is one Kafka
transaction of its transactional producer:

1. plan each partition's commit (the watermark and the offset map, as at-least-once does);
2. take the outputs of the records those plans cover and the partition's last commit did not
   (:class:`~priority_kafka._workers.OutputBuffer`), in offset order;
3. ``begin``; send the outputs; add the offsets, one ``send_offsets_to_transaction`` per
   consumer group with that group member's metadata (a PriorityConsumer has one group per
   level: all levels commit in the same transaction); ``commit``.

So a record's output is committed exactly when a commit that covers the record is: after a
crash, the next owner skips the record (below the watermark or in the map) and its output is
in the log; or neither happened, and it handles the record again. A reader with
``isolation.level=read_committed`` sees each output once.

A transaction that fails is aborted and its partitions *rewound* to their last commit: queued
records dropped, the ledger's state and the kept outputs forgotten, the consumer sought back,
so every record since is handled again and its output produced again, in a later transaction.
A member fenced by a rebalance (KIP-447: the group's generation in the offsets' metadata is
stale) fails this way too, and the partitions' new owner redoes them.

When even the abort fails, the producer cannot go on: it was fenced (the coordinator aborted
a transaction left open past ``transaction.timeout.ms``, as happens to a process frozen
mid-commit, and bumped the epoch; or a newer producer took its ``transactional.id``) or failed
fatally. Given a producer, the executor then stops with
:class:`~priority_kafka.errors.TransactionError`. Given a factory, it closes that producer and
goes on with a new one (as Kafka Streams does under exactly-once v2: with KIP-447 the group's
generation, not the producer's epoch, fences a zombie), unless the factory fails or
:data:`MAX_RENEWALS` producers in a row are fenced before one commits (another live process
with the same ``transactional.id``: they would fence each other forever).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from priority_kafka._structs import OffsetAndMetadata, TopicPartition
from priority_kafka._types import TransactionalSender
from priority_kafka._workers import Counters, OutputBuffer
from priority_kafka.errors import TransactionError
from priority_kafka.executor._ledger import PartitionLedger

__all__ = ["MAX_RENEWALS", "TransactionalCommits", "is_producer_factory"]

log = logging.getLogger("priority_kafka.executor")

#: New producers built for fenced ones before one commits: past it the executor stops.
MAX_RENEWALS = 3


def is_producer_factory(producer: Any) -> bool:
    """Whether ``transactional_producer`` is a factory (a call with no arguments returning a
    producer), not a producer (either family's has ``send`` or ``produce``)."""
    return callable(producer) and not any(
        callable(getattr(producer, name, None)) for name in ("send", "produce")
    )


class TransactionalCommits:
    """The commits of an exactly-once executor (see the module docstring).

    :meth:`commit` runs on the polling thread, or in a rebalance hook while the polling thread
    waits inside ``poll()``: never two at once.
    """

    def __init__(
        self,
        consumer: Any,
        producer: Any,
        ledger: PartitionLedger,
        outputs: OutputBuffer,
        counters: Counters,
    ) -> None:
        """``producer``: the executor's ``transactional_producer``, a producer (checked now)
        or a factory of them (its producers are checked as it builds them, from :meth:`start`
        on, and closed with the executor)."""
        self._consumer = consumer
        self._factory: Callable[[], Any] | None = None
        self._sender: TransactionalSender | None = None
        if is_producer_factory(producer):
            self._factory = producer
        else:
            self._sender = consumer.transactions(producer)
        self._ledger = ledger
        self._outputs = outputs
        self._counters = counters
        self._renewals = 0  # producers built for fenced ones since the last commit
        #: Set once the producer cannot go on: the executor stops and raises it.
        self.fatal: TransactionError | None = None

    def __repr__(self) -> str:
        producer = repr(self._sender) if self._factory is None else f"factory {self._factory!r}"
        return f"TransactionalCommits({producer}, {self._outputs!r})"

    def start(self) -> None:
        """Initialise the producer (building it, given a factory): an earlier one with its
        transactional id is fenced, and the transaction it left open is aborted."""
        try:
            self._init()
        except Exception as exc:
            self.fatal = TransactionError(f"initialising the transactional producer failed: "
                                          f"{exc!r}")
            raise self.fatal from exc

    def _init(self) -> None:
        if self._factory is not None:
            self._sender = self._consumer.transactions(self._factory(), owned=True)
        self._current().init()

    def _current(self) -> TransactionalSender:
        if self._sender is None:
            raise TransactionError("the transactional producer was not started")
        return self._sender

    def commit(self, partitions: Collection[TopicPartition]) -> frozenset[TopicPartition]:
        """Commit what is done of ``partitions``, with its outputs, in one transaction.

        Returns the partitions of a transaction that failed and was aborted: they must be
        handled again from their last commit (empty when it committed, or had nothing to)."""
        if self.fatal is not None:
            return frozenset()
        offsets = self._ledger.committable(partitions)
        if not offsets:
            return frozenset()
        plans = self._ledger.plans(offsets)
        outputs = [
            output for tp in sorted(offsets)
            for output in self._outputs.take(tp, plans[tp], self._ledger.last_committed(tp))
        ]
        try:
            self._transact(offsets, outputs)
        except Exception as exc:
            self._abort(offsets, exc)
            return frozenset(offsets)
        self._ledger.committed(offsets)
        self._renewals = 0
        self._counters.add("transactions")
        if outputs:
            self._counters.add("outputs", len(outputs))
        return frozenset()

    def _transact(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], outputs: list[Any]
    ) -> None:
        sender = self._current()
        sender.begin()
        for output in outputs:
            sender.send(output)
        for group_metadata, group_offsets in self._consumer.transaction_groups(offsets):
            try:
                sender.send_offsets(group_offsets, group_metadata)
            except Exception as exc:
                if self._consumer.rejoin_refused(exc, group_offsets):
                    self._counters.add("membership_rejoins")
                raise
        sender.commit()

    def _abort(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], error: Exception) -> None:
        self._counters.add("aborted_transactions")
        log.warning("transaction of %s failed (%r): aborted; those partitions are handled "
                    "again from their last commit", sorted(offsets), error)
        try:
            self._current().abort()
            return
        except Exception as exc:
            refused = exc
        failed = f"the transactional producer cannot go on: {error!r}; aborting failed: {refused!r}"
        if self._factory is None:
            self._stop(failed, refused)
        elif self._renewals >= MAX_RENEWALS:
            self._stop(f"{failed} ({MAX_RENEWALS} producers in a row fenced before one committed: "
                       "is another live process using the same transactional id?)", refused)
        else:
            try:
                self._renew(error, refused)
            except Exception as exc:
                self._stop(f"{failed}; its replacement failed: {exc!r}", exc)

    def _stop(self, message: str, cause: BaseException) -> None:
        """The producer cannot go on: the executor stops and raises this."""
        self.fatal = TransactionError(message)
        self.fatal.__cause__ = cause
        log.error("%s", self.fatal)

    def _renew(self, error: Exception, refused: Exception) -> None:
        """Close the fenced producer and go on with a new one from the factory."""
        self._renewals += 1
        self._counters.add("renewed_producers")
        log.warning("the transactional producer cannot go on (%r; its abort: %r): closing it "
                    "and initialising a new one from the factory", error, refused)
        try:
            self._current().close()
        except Exception as exc:  # it is fenced: what it failed to close matters no more
            log.warning("closing the fenced transactional producer failed: %r", exc)
        self._sender = None
        self._init()

    def restart_points(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Where each of ``partitions`` must be consumed from to redo all since its last
        commit."""
        return self._ledger.restart_points(partitions)

    def forget(self, partitions: Collection[TopicPartition]) -> None:
        """Drop the outputs kept for ``partitions`` (their ledger state is dropped apart)."""
        self._outputs.drop(partitions)

    def close(self) -> None:
        if self._sender is not None:
            self._sender.close()
