"""Where kafka-python 3 differs from Java's consumer when a member loses its membership, and
the work-arounds: both let a member frozen past its session commit, under exactly-once, the
outputs of records its partitions' next owner had already committed
(``tests/test_executor_exactly_once.py::test_a_member_frozen_past_its_session_is_fenced_and_
writes_nothing_twice``).

- **A refused membership** (a transaction's offsets refused with UnknownMemberIdError or
  IllegalGenerationError, KIP-447) is known to kafka-python only at its next heartbeat;
  :func:`drop_refused_membership` drops the generation at once, as that heartbeat would.
- **An eagerly revoked partition keeps its fetch position** when the rebalance assigns it
  back (``assign_from_subscribed`` keeps the state of partitions in both assignments; Java's
  consumer empties its assignment once the revoke callback has run). A member that revoked
  with a generation the group had already replaced resumed from its own old position, below
  what the partition's owner meanwhile committed. :func:`forget_kept_positions` makes such a
  partition read its group's commit, as any newly assigned partition does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.consumer.subscription_state import TopicPartitionState
from kafka.errors import IllegalGenerationError
from kafka.structs import TopicPartition

from priority_kafka.kafka_python._kafka import _coordinator

__all__ = ["drop_refused_membership", "forget_kept_positions"]


def drop_refused_membership(consumer: Any, error: BaseException) -> None:
    """The group refused ``consumer``'s membership with a transaction's offsets: drop the
    generation, so the next ``poll()`` rejoins and gives the partitions up as *lost* (no
    commit is tried for them). A stale generation keeps the member id (the group still knows
    it); an unknown member joins as a new one."""
    coordinator = _coordinator(consumer)
    if coordinator is None:
        return
    # kafka-python's CommitFailedError carries the broker's error only as its name, in text.
    if IllegalGenerationError.__name__ in str(error):
        coordinator.reset_generation(member_id=coordinator._generation.member_id)
    else:
        coordinator.reset_generation()


def forget_kept_positions(consumer: Any, partitions: Iterable[TopicPartition]) -> None:
    """Make each of ``partitions`` assigned to ``consumer`` read its group's committed offset
    before its next fetch, as a newly assigned partition does (a pause is kept). Call from
    ``on_partitions_assigned``: kafka-python resolves missing positions in the poll after."""
    subscription = getattr(consumer, "_subscription", None)
    if subscription is None:
        return
    with subscription._lock:
        for tp in partitions:
            kept = subscription.assignment.get(tp)
            if kept is not None:
                fresh = TopicPartitionState()
                fresh.paused = kept.paused
                subscription.assignment[tp] = fresh
