"""Partitions added to a level's topics after its first assignment start at their beginning
(confluent-kafka's side of :mod:`priority_kafka.added`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from priority_kafka.added import AddedPartitions

__all__ = ["RebalanceCallback", "assign_callback", "start_added_at_beginning"]

#: confluent-kafka's rebalance callback: ``(consumer, [TopicPartition, ...])``.
RebalanceCallback = Callable[[Any, list[TopicPartition]], None]

log = logging.getLogger(__name__)

# How long an assignment waits for the added partitions' committed offsets, and the pause
# between tries when the group's coordinator is moving.
_TIMEOUT_S = 10.0
_RETRY_S = 0.2


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
    committed = _committed(consumer, [TopicPartition(t, p) for t, p in sorted(new)])
    # A partition whose commit could not be read (its own error, e.g. an unstable offset of
    # an open transaction) is not one without a commit: it keeps librdkafka's start, which
    # reads its commit. Taken for uncommitted, it would be read again from its beginning.
    unread = [tp for tp in committed if tp.error is not None]
    if unread:
        _unread([f"{tp.topic}-{tp.partition} ({tp.error})" for tp in unread])
    never = {(tp.topic, tp.partition) for tp in committed if tp.error is None and tp.offset < 0}
    fresh = [tp for tp in partitions if (tp.topic, tp.partition) in never]
    for tp in fresh:
        tp.offset = OFFSET_BEGINNING
    if fresh:
        log.info("partitions added since the first assignment, never committed, start at "
                 "their beginning: %s", [f"{tp.topic}-{tp.partition}" for tp in fresh])
    return fresh


def _committed(consumer: Any, partitions: list[TopicPartition]) -> list[TopicPartition]:
    """``consumer.committed(partitions)``, tried again while it fails with a retriable error
    (NOT_COORDINATOR while the group's coordinator moves: librdkafka does not retry it) for up
    to _TIMEOUT_S. Still failing, [] (a warning): the partitions keep librdkafka's own start,
    as before they were known to be added, since an error raised here ends the ``consume()``
    that serves the callback (a chaos-soak member died of it)."""
    deadline = time.monotonic() + _TIMEOUT_S
    while True:
        try:
            return list(consumer.committed(
                partitions, timeout=max(deadline - time.monotonic(), _RETRY_S)))
        except KafkaException as exc:
            error = exc.args[0]
            moving = error.retriable() or error.code() == KafkaError.NOT_COORDINATOR
            if not moving or time.monotonic() + _RETRY_S >= deadline:
                _unread([f"{tp.topic}-{tp.partition}" for tp in partitions], error.str())
                return []
            time.sleep(_RETRY_S)


def _unread(partitions: list[str], why: str = "") -> None:
    """Warn that the commits of added ``partitions`` could not be read (``why``)."""
    log.warning("could not read the commits of added partitions %s%s: they start where "
                "librdkafka starts them (their commit, or auto.offset.reset)",
                partitions, f" ({why})" if why else "")


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
