"""PriorityShareConsumer (experimental): priority levels over share groups (KIP-932).

A logical topic ``jobs`` with ``max.priority`` 3 is the Kafka topics ``jobs-0`` .. ``jobs-2``;
one ``confluent_kafka.ShareConsumer`` per level reads its topics in share group
``<group.id>-<level>``, in explicit acknowledgement mode. Each :meth:`PriorityShareConsumer.poll`
is one round of at most ``max.poll.records`` messages, split over the levels by the same rule as
the other consumers (:class:`~priority_kafka.CapacityBurst` quotas, trimmed by
:func:`priority_kafka.burst.allocate`), highest level first. Each level's fetch asks the broker
for at most ``max.poll.records`` records too (librdkafka's own ``max.poll.records``), which the
broker rounds up to whole producer batches. :class:`priority_kafka.confluent.ShareExecutor`
runs a handler over the levels on a pool of workers instead (``share_executor``).

Experimental: confluent-kafka's ``ShareConsumer`` is a preview API, and this class follows it.
What a share group does and does not guarantee (no order, a delivery limit, a lock per record)
is in docs/share-groups.md.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer

from priority_kafka._levels import LevelRouter, PriorityFront, capacity_burst
from priority_kafka.burst import CapacityBurst, allocate
from priority_kafka.confluent._bounded import close_within
from priority_kafka.confluent._config import (
    InvalidArgError,
    connection_config,
    invalid_arg,
    merge,
    named_property,
    split_config,
)
from priority_kafka.confluent._metadata import check_level_topics
from priority_kafka.errors import IllegalStateError
from priority_kafka.naming import level_group_id, priority_topic

__all__ = ["PriorityShareConsumer", "ShareLevel"]

# While nothing is available, poll() blocks on the highest level that may poll for at most this
# long before trying the others without blocking (as the confluent PriorityConsumer does).
_WAKE_S = 0.05
_COUNTERS = ("delivered", "redelivered", "accepted", "released", "rejected")


class ShareLevel:
    """One level: its share consumer and share group, the acquired messages not handed out
    yet, and those handed out and not acknowledged."""

    __slots__ = ("acks_unsent", "buffer", "consumer", "counters", "group_id", "level",
                 "outstanding")

    def __init__(self, level: int, consumer: Any, group_id: str) -> None:
        self.level = level
        self.consumer = consumer
        self.group_id = group_id
        self.buffer: deque[Message] = deque()
        self.outstanding: dict[tuple[str, int, int], Message] = {}
        self.counters: Counter[str] = Counter()
        # Acknowledged since this level's consumer last polled or committed.
        self.acks_unsent = False

    @property
    def may_poll(self) -> bool:
        # Explicit mode: every message of a poll must be acknowledged before the next poll.
        return not self.buffer and not self.outstanding


class PriorityShareConsumer(PriorityFront):
    """Consume priority topics through one share group per level (experimental).

    ``PriorityShareConsumer({"bootstrap.servers": ..., "group.id": "jobs", "max.priority": 3})``
    takes librdkafka's share consumer properties plus the priority settings of
    :class:`~priority_kafka.confluent.PriorityConsumer` (``max.poll.records`` is the most
    messages one :meth:`poll` returns over all levels, and the most each level's fetch asks the
    broker for: it acquires whole producer batches, so a level may acquire more when the
    producers' batches are larger). ``group.id`` and ``client.id`` get a ``-<level>`` suffix per
    level. ``share.acknowledgement.mode`` is always ``explicit``.

    Guarantees: every message :meth:`poll` returns stays acquired by this consumer until it is
    acknowledged with :meth:`acknowledge` (ACCEPT, RELEASE or REJECT) or its lock expires
    (``group.share.record.lock.duration.ms``, 30 s by default); acknowledgements are sent to the
    broker at the start of the next :meth:`poll` (by the level's own poll, or by its
    ``commit_async`` while it still hands out an earlier acquisition), or by
    :meth:`commit_sync`/:meth:`commit_async` or :meth:`close`;
    :meth:`close` RELEASEs every message acquired and not acknowledged (handed out or not), so
    another member gets it at once. A level polls the broker again only once every message of
    its previous poll is acknowledged; what it acquired beyond this round's quota waits, still
    locked, for the next rounds. Not thread-safe, as ``ShareConsumer`` is.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        self._config, librdkafka = split_config(merge(config, kwargs))
        mode = librdkafka.pop("share.acknowledgement.mode", "explicit")
        if mode != "explicit":
            raise InvalidArgError(
                f"'share.acknowledgement.mode' must be 'explicit' for a PriorityShareConsumer "
                f"(got {mode!r}): a message is acknowledged when handled, not on the next poll."
            )
        group = librdkafka.get("group.id")
        if not isinstance(group, str) or not group:
            raise InvalidArgError(f"'group.id' is required: the share groups are "
                                  f"'<group.id>-<level>' (got {group!r}).")
        reserved = self._config.reserved_quotas()
        self._reserved = reserved
        self._router = LevelRouter(self._config.max_priority)
        self._connection = connection_config(librdkafka)
        self._burst = capacity_burst(self._config)
        self._levels: list[ShareLevel] = []  # highest first
        try:
            for level in reserved:
                level_config = {**librdkafka, "share.acknowledgement.mode": "explicit",
                                "max.poll.records": self._config.max_poll_records}
                with invalid_arg():
                    level_config["group.id"] = level_group_id(group, level)
                if level_config.get("client.id"):
                    level_config["client.id"] = f"{level_config['client.id']}-{level}"
                with named_property():
                    consumer = ShareConsumer(level_config)
                self._levels.append(ShareLevel(level, consumer, level_config["group.id"]))
        except BaseException:
            for built in self._levels:
                built.consumer.close()
            raise
        self._by_level = {lv.level: lv for lv in self._levels}
        self._closed = False

    @property
    def max_poll_records(self) -> int:
        """The most messages one :meth:`poll` returns, and one level's fetch asks for."""
        return self._config.max_poll_records

    @property
    def connection_config(self) -> dict[str, Any]:
        """The librdkafka properties given that say how to reach and authenticate to the
        cluster (``bootstrap.servers``, ``security.protocol``, ``ssl.*``, ``sasl.*``, ...), for
        another client of it (a copy)."""
        return dict(self._connection)

    @property
    def share_levels(self) -> list[ShareLevel]:
        """The levels, highest first, for :class:`~priority_kafka.confluent.ShareExecutor`,
        which polls and acknowledges through their share consumers itself."""
        self._check_open()
        return list(self._levels)

    @property
    def burst(self) -> CapacityBurst:
        """The history windows and burst counts (read them; the consumer updates them)."""
        return self._burst

    def priority_of(self, topic: str) -> int:
        """The priority level of a priority topic (``"jobs-2"`` -> 2); InvalidArgError naming
        a topic of no level."""
        with invalid_arg():
            return self._router.level_of(topic)

    def subscribe(self, topics: Sequence[str]) -> None:
        """Subscribe every level's share consumer to its priority topics of ``topics``.

        The levels are checked against the broker's topics first, as
        :meth:`PriorityConsumer.subscribe` checks them (unread levels: InvalidArgError;
        missing ones: MissingTopicsError, or a warning with ``wait.for.topics``).
        """
        self._check_open()
        if isinstance(topics, str) or not isinstance(topics, Sequence) or not topics:
            raise InvalidArgError(f"'topics' must be a non-empty list of logical topic names "
                                  f"(got {topics!r}).")
        with invalid_arg():
            per_level = {lv.level: [priority_topic(t, lv.level) for t in topics]
                         for lv in self._levels}
        # The levels against the broker's topics, as PriorityConsumer.subscribe() checks them.
        check_level_topics(Producer(self._connection), topics, self.max_priority,
                           self._config.wait_for_topics)
        for lv in self._levels:
            lv.consumer.subscribe(per_level[lv.level])

    def poll(self, timeout: float = -1) -> list[Message]:
        """One round: up to ``max.poll.records`` acquired messages, highest level first, split
        by the levels' quotas. Waits up to ``timeout`` seconds (-1: for ever) for at least one.

        Error events come as messages with ``error()`` set, as from ``ShareConsumer.poll``.
        Acknowledge every returned message (:meth:`acknowledge`) before its lock expires. When
        nothing is buffered and every level still holds unacknowledged messages, returns ``[]``
        at once: nothing can be acquired before those are acknowledged.
        """
        self._check_open()
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout != timeout:
            raise InvalidArgError(f"'timeout' must be a number of seconds (got {timeout!r}).")
        deadline = None if timeout < 0 else time.monotonic() + timeout
        self._send_acks()
        errors = self._fill(0.0)
        while not errors and not any(lv.buffer for lv in self._levels):
            if not any(lv.may_poll for lv in self._levels):
                return []  # nothing can come before the caller acknowledges what it holds
            wait = _WAKE_S if deadline is None else min(_WAKE_S, deadline - time.monotonic())
            if wait <= 0:
                return []
            errors = self._fill(wait)
        taken = allocate(
            self._burst.quotas(), {lv.level: len(lv.buffer) for lv in self._levels},
            self._config.max_poll_records, self._burst.bursting_level,
        )
        messages: list[Message] = []
        for lv in self._levels:
            for _ in range(taken[lv.level]):
                message = lv.buffer.popleft()
                lv.outstanding[_key(message)] = message
                messages.append(message)
        self._burst.record(taken)
        return messages + errors

    def _send_acks(self) -> None:
        """Send the acknowledgements of the levels that will not poll their consumer now: one
        still handing out an acquisition larger than its quotas would otherwise hold them back
        for many rounds, and a crash would deliver its ACCEPTed messages again."""
        for lv in self._levels:
            if lv.acks_unsent and not lv.may_poll:
                lv.consumer.commit_async()
                lv.acks_unsent = False

    def _fill(self, wait: float) -> list[Message]:
        """Poll the levels that may (the highest of them waiting up to ``wait``); buffer what
        they acquire; return the error events."""
        errors: list[Message] = []
        for lv in self._levels:
            if not lv.may_poll:
                continue
            polled = lv.consumer.poll(wait)
            lv.acks_unsent = False  # the poll sent them
            for message in polled:
                if message.error() is not None:
                    errors.append(message)
                    continue
                lv.counters["delivered"] += 1
                if (message.delivery_count() or 1) > 1:
                    lv.counters["redelivered"] += 1
                lv.buffer.append(message)
            wait = 0.0
        return errors

    def acknowledge(self, message: Message, ack_type: AcknowledgeType = AcknowledgeType.ACCEPT
                    ) -> None:
        """Acknowledge a message :meth:`poll` returned: ACCEPT (handled), RELEASE (deliver it
        again, to any member) or REJECT (never deliver it again). Sent with the next
        :meth:`poll`, commit or :meth:`close`."""
        self._check_open()
        if ack_type not in _ACK_COUNTER:
            raise InvalidArgError(f"'ack_type' must be an AcknowledgeType: ACCEPT, RELEASE or "
                                  f"REJECT (got {ack_type!r}).")
        lv = self._level_of(message)
        if lv.outstanding.pop(_key(message), None) is None:
            raise InvalidArgError(
                f"{message.topic()}[{message.partition()}]@{message.offset()} was not returned "
                f"by this consumer's poll(), or is acknowledged already."
            )
        lv.consumer.acknowledge(message, ack_type)
        lv.acks_unsent = True
        lv.counters[_ACK_COUNTER[ack_type]] += 1

    def commit_sync(self, timeout: float = 60) -> None:
        """Send every level's pending acknowledgements and wait for the broker's answers."""
        self._check_open()
        for lv in self._levels:
            lv.consumer.commit_sync(timeout)
            lv.acks_unsent = False

    def commit_async(self) -> None:
        """Send every level's pending acknowledgements without waiting."""
        self._check_open()
        for lv in self._levels:
            lv.consumer.commit_async()
            lv.acks_unsent = False

    def metrics(self) -> dict[int, dict[str, int]]:
        """Per level, highest first: messages ``delivered`` (acquired), ``redelivered`` (of
        those, delivered before: a delivery count above 1), ``accepted``, ``released``,
        ``rejected``, and now ``buffered`` (acquired, not returned) and ``outstanding``
        (returned, not acknowledged). Records the broker archived are not visible here."""
        return {
            lv.level: {**{name: lv.counters[name] for name in _COUNTERS},
                       "buffered": len(lv.buffer), "outstanding": len(lv.outstanding)}
            for lv in self._levels
        }

    def close(self, timeout: float = 30) -> None:
        """RELEASE what was acquired and not acknowledged, send every level's acknowledgements
        and wait for the broker's answers, then close the levels (which leave their share
        groups), together, waiting at most ``timeout`` seconds (Java's
        ``KafkaShareConsumer.close()`` default) for each step. A level whose close has not
        returned by then is named in a warning and left to finish in the background: librdkafka
        2.16's share consumer close was seen to block for good. Closing twice does nothing."""
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise InvalidArgError(
                f"'timeout' must be a positive number of seconds (got {timeout!r})."
            )
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        for lv in self._levels:
            try:
                for message in [*lv.outstanding.values(), *lv.buffer]:
                    lv.consumer.acknowledge(message, AcknowledgeType.RELEASE)
                    lv.counters["released"] += 1
                lv.outstanding.clear()
                lv.buffer.clear()
                lv.consumer.commit_sync(timeout)
            except Exception as exc:
                errors.append(exc)
        errors += close_within(
            [(f"share group {lv.group_id!r}", lv.consumer.close) for lv in self._levels], timeout
        )
        if errors:
            raise errors[0]

    def __enter__(self) -> PriorityShareConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"levels={[lv.level for lv in self._levels]}"
        return f"PriorityShareConsumer({state}, max_priority={self.max_priority})"

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("PriorityShareConsumer closed")

    def _level_of(self, message: Any) -> ShareLevel:
        if not isinstance(message, Message):
            raise InvalidArgError(f"'message' must be a Message from poll() (got {message!r}).")
        return self._by_level[self.priority_of(message.topic() or "")]


_ACK_COUNTER = {
    AcknowledgeType.ACCEPT: "accepted",
    AcknowledgeType.RELEASE: "released",
    AcknowledgeType.REJECT: "rejected",
}


def _key(message: Message) -> tuple[str, int, int]:
    return (message.topic() or "", message.partition() or 0, message.offset() or 0)
