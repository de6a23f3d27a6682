"""A level consumer whose librdkafka handle lost every broker for good, and its replacement.

librdkafka (2.10 to at least 2.16) drops every broker it knows when a Metadata response lists
none, as a lone Kafka node answers while it shuts down. A re-bootstrap should then start over
from ``bootstrap.servers``, but a race can cancel it for good (librdkafka issue #5301; always
so with ``metadata.recovery.strategy=none``). The handle then never dials again: no message, no
heartbeat, no error, and a synchronous commit or ``close()`` on it waits for ever. Its
statistics tell: no broker left but the logical group coordinator.

So each level's consumer sends statistics (every ``statistics.interval.ms``; 5 s unless the
caller set it) to a :class:`BrokerWatch`. Two in a row without a broker, and the confluent
PriorityConsumer replaces that level's consumer from its next ``consume()``: a new
``Consumer`` of the same configuration, subscribed as the old one was, whose group gives it
the level's partitions once the old member's session has timed out. The old assignment is
reported lost (``on_lost``, or ``on_revoke`` without it, as librdkafka does), and the old
handle is closed on a daemon thread, since its close may never return.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from priority_kafka.confluent._added import RebalanceCallback

__all__ = [
    "LOST", "STATS_INTERVAL_MS", "BrokerWatch", "Level", "Renewals", "close_abandoned",
    "knows_a_broker", "serving", "watch_statistics",
]

log = logging.getLogger(__name__)

#: Why a level consumer whose statistics show no broker is replaced.
LOST = ("lost every broker for good: its last statistics listed none (librdkafka issue #5301, "
        "or metadata.recovery.strategy=none)")
#: The statistics interval of a level consumer when the caller set none.
STATS_INTERVAL_MS = 5000
# Statistics in a row without a broker before a level counts as lost: a re-bootstrap that
# works adds the bootstrap brokers back within milliseconds.
_LOST_AFTER = 2
# librdkafka's statistics name each broker's source: "configured" (bootstrap.servers),
# "learned" (metadata), "logical" (the group coordinator) or "internal".
_REAL_SOURCES = ('"source":"learned"', '"source":"configured"')


def knows_a_broker(stats: str) -> bool:
    """Whether librdkafka's statistics JSON lists a broker it can dial (a bootstrap or a
    learned one): a substring test, as a level's stats come every few seconds."""
    return _REAL_SOURCES[0] in stats or _REAL_SOURCES[1] in stats


def watch_statistics(librdkafka: dict[str, Any]) -> Callable[[str], Any] | None:
    """Make ``librdkafka`` send statistics for the watch, every :data:`STATS_INTERVAL_MS` unless
    the caller set ``statistics.interval.ms`` (0 counts as unset; a value that is no number is
    left for librdkafka to refuse, naming it). Returns the caller's ``stats_cb`` when it asked
    for statistics (an interval over 0), else None: librdkafka would never call it."""
    stats_cb = librdkafka.get("stats_cb")
    if stats_cb is not None and not callable(stats_cb):
        raise TypeError(f"expected stats_cb property as a callable function (got {stats_cb!r})")
    try:
        asked = int(librdkafka.get("statistics.interval.ms", 0)) > 0
    except (TypeError, ValueError):
        return None
    if not asked:
        librdkafka["statistics.interval.ms"] = STATS_INTERVAL_MS
    return stats_cb if asked else None


class BrokerWatch:
    """One level consumer's ``stats_cb``: calls ``lost()`` once its statistics have shown no
    broker :data:`_LOST_AFTER` times in a row, and passes every statistics JSON on to ``then``
    (the caller's ``stats_cb``, if any). Once retired (:meth:`retire`: its consumer replaced,
    which may still call it while it closes), it does nothing."""

    __slots__ = ("_lost", "_then", "reported", "retired", "without")

    def __init__(self, lost: Callable[[], None], then: Callable[[str], Any] | None) -> None:
        self._lost = lost
        self._then = then
        self.without = 0  # statistics in a row without a broker
        self.reported = False
        self.retired = False

    def __call__(self, stats: str) -> None:
        if self.retired:
            return
        if knows_a_broker(stats):
            self.without = 0
        else:
            self.without += 1
            if self.without >= _LOST_AFTER and not self.reported:
                self.reported = True
                self._lost()
        if self._then is not None:
            self._then(stats)

    def retire(self) -> BrokerWatch:
        """Stop; return a new watch, for the consumer that replaces this one's."""
        self.retired = True
        return BrokerWatch(self._lost, self._then)


class Level:
    """One priority level: its consumer, the configuration it was made with, how it was
    subscribed, and the partitions its group gave it (kept from the rebalance callbacks, as a
    lost handle cannot be asked)."""

    __slots__ = ("assigned", "closed", "config", "consumer", "level", "subscription", "watch")

    def __init__(self, level: int, config: dict[str, Any], watch: BrokerWatch) -> None:
        self.level = level
        self.config = config
        self.watch = watch
        # Any: confluent's stubs overload commit() on Literal booleans, ours passes a bool.
        self.consumer: Any = Consumer(config)
        self.closed = False
        #: The topics and the (wrapped) rebalance callbacks of subscribe(), or None.
        self.subscription: tuple[list[str], dict[str, Any]] | None = None
        self.assigned: set[tuple[str, int]] = set()

    def __repr__(self) -> str:
        return f"Level({self.level})"

    def track(self, event: str, partitions: list[TopicPartition], cooperative: bool) -> None:
        """Follow the assignment through a rebalance callback (``on_assign``, ...)."""
        named = {(tp.topic, tp.partition) for tp in partitions}
        if event != "on_assign":
            self.assigned -= named
        elif cooperative:
            self.assigned |= named
        else:
            self.assigned = named

    def replace(self) -> tuple[Any, list[TopicPartition]]:
        """Put a new consumer of the same configuration in, subscribed as the old one was;
        return the old one and the partitions it had."""
        old = self.consumer
        self.watch = self.config["stats_cb"] = self.watch.retire()
        self.consumer = Consumer(self.config)
        if self.subscription is not None:
            topics, callbacks = self.subscription
            self.consumer.subscribe(topics, **callbacks)
        lost = [TopicPartition(topic, partition) for topic, partition in sorted(self.assigned)]
        self.assigned = set()
        return old, lost


def close_abandoned(name: str, handle: Any) -> None:
    """Close a replaced handle (``name``: what it was, for the log) on a daemon thread: a handle
    that lost every broker may never finish its close (a commit it waits for is retried for
    ever)."""

    def close() -> None:
        started = time.monotonic()
        try:
            handle.close()
        except Exception as exc:  # nothing waits for it: say what happened
            log.warning("closing the replaced %s failed: %r", name, exc)
        else:  # one line per handle: one that never ends its close keeps its threads
            log.info("the replaced %s closed in %.1f s", name, time.monotonic() - started)

    threading.Thread(target=close, name=f"close replaced {name}", daemon=True).start()


class Renewals:
    """The levels whose consumer the next ``consume()`` replaces, why, and the replacing.

    ``consumers`` is the PriorityConsumer's list of its levels' consumers (by round position),
    kept up to date here.
    """

    __slots__ = ("_consumers", "_cooperative", "_levels", "due", "renewing")

    def __init__(self, levels: list[Level], consumers: list[Any], cooperative: bool) -> None:
        self._levels = levels
        self._consumers = consumers
        self._cooperative = cooperative
        self.due: dict[Level, str] = {}
        #: The replaced consumer's partitions are being reported lost: an assign-style call
        #: does nothing (the new consumer has none).
        self.renewing = False

    def ask(self, lv: Level, reason: str) -> None:
        """Replace ``lv``'s consumer at the next :meth:`run` (the first reason asked stays)."""
        self.due.setdefault(lv, reason)

    def current(self, lv: Level, event: str, callback: RebalanceCallback) -> RebalanceCallback:
        """``callback`` (for ``event``) for ``lv``'s consumer only, not one replaced and closing
        in the background, following the level's assignment."""
        cooperative = self._cooperative

        def called(consumer: Any, partitions: list[TopicPartition]) -> None:
            if consumer is lv.consumer:
                lv.track(event, partitions, cooperative)
                callback(consumer, partitions)

        return called

    def run(self, forget: Callable[[Level, list[TopicPartition]], None]) -> None:
        """Replace the consumers due; ``forget(level, lost)`` drops what the caller kept of
        the lost partitions before their loss is reported through the level's callback."""
        due, self.due = self.due, {}
        for lv, reason in due.items():
            if lv.subscription is None:
                log.error("level %d's consumer %s, but it has no subscription to take over "
                          "(assigned by hand): close this consumer and make a new one",
                          lv.level, reason)
                continue
            old, lost = lv.replace()
            self._consumers[self._levels.index(lv)] = lv.consumer
            forget(lv, lost)
            log.warning("level %d's consumer %s: replaced by a new one; its partitions %s "
                        "are reported lost until the group gives them to the new one",
                        lv.level, reason, [f"{tp.topic}-{tp.partition}" for tp in lost])
            close_abandoned(f"consumer of level {lv.level}", old)
            callbacks = lv.subscription[1]
            if lost:
                self.renewing = True
                try:
                    callbacks.get("on_lost", callbacks["on_revoke"])(lv.consumer, lost)
                finally:
                    self.renewing = False


def serving(levels: Sequence[Level], then: Callable[[], None]) -> Callable[[], None]:
    """What to do while a subscribe() waits for the cluster's metadata: the levels not
    subscribed yet serve their callbacks (errors, log lines; a subscribed one would hand out
    messages), then ``then`` (LoginWatch's check), so a cluster that cannot be reached is
    named at once."""

    def serve() -> None:
        for lv in levels:
            if lv.subscription is None:
                lv.consumer.poll(0)
        then()

    return serve
