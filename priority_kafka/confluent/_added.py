"""Partitions added to a level's topics after its first assignment start at their beginning
(confluent-kafka's side of :mod:`priority_kafka.added`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from priority_kafka.added import AddedPartitions

__all__ = ["RebalanceCallback", "assign_callback", "start_added_at_beginning"]

#: confluent-kafka's rebalance callback: ``(consumer, [TopicPartition, ...])``.
RebalanceCallback = Callable[[Any, list[TopicPartition]], None]

# How long an assignment waits for the added partitions' committed offsets.
_TIMEOUT_S = 10.0


def start_added_at_beginning(
    consumer: Any,
    added: AddedPartitions,
    partitions: list[TopicPartition],
    counts: Callable[[], Mapping[str, int]],
) -> list[TopicPartition]:
    """Set ``OFFSET_BEGINNING`` on the partitions of ``partitions`` (an ``on_assign`` list)
    added since the first assignment and never committed; returns them. ``counts`` gives
    every topic's partition count (from another client than ``consumer``: see
    :mod:`priority_kafka.confluent._metadata`). The caller assigns ``partitions``
    (librdkafka assigns its own, unchanged list otherwise)."""
    new = set(added.added(((tp.topic, tp.partition) for tp in partitions), counts))
    if not new:
        return []
    committed = consumer.committed(
        [TopicPartition(t, p) for t, p in sorted(new)], timeout=_TIMEOUT_S)
    never = {(tp.topic, tp.partition) for tp in committed if tp.offset < 0}
    fresh = [tp for tp in partitions if (tp.topic, tp.partition) in never]
    for tp in fresh:
        tp.offset = OFFSET_BEGINNING
    return fresh


def assign_callback(
    user: RebalanceCallback,
    cooperative: bool,
    counts: Callable[[], Mapping[str, int]],
    closing: Callable[[], bool],
) -> RebalanceCallback:
    """A level's ``on_assign``: :func:`start_added_at_beginning`, then ``user``'s callback; if
    that did not assign, the partitions are assigned here (``incremental_assign`` when
    ``cooperative``), with the beginning offsets librdkafka's own assignment would drop.

    One per subscription: its first assignment is the reference for what was added. An
    assignment served while the consumer is ``closing`` (``close()`` serves one still queued,
    then revokes it) is left as librdkafka makes it: the client is being destroyed and
    refuses the calls that would look (``Broker handle destroyed for termination``).
    """
    added = AddedPartitions()

    def on_assign(consumer: Any, partitions: list[TopicPartition]) -> None:
        fresh = [] if closing() else start_added_at_beginning(
            consumer, added, partitions, counts)
        user(consumer, partitions)
        if not fresh:
            return
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        if (fresh[0].topic, fresh[0].partition) not in assigned:
            # The user's callback did not assign: librdkafka would assign its own list,
            # without the beginning offsets.
            if cooperative:
                consumer.incremental_assign(partitions)
            else:
                consumer.assign(partitions)

    return on_assign
