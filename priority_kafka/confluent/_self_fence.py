"""A static level member fenced by its own rejoin, told from a real fence, and renewed.

librdkafka (2.16) can fence its own static member (librdkafka issue #3437, open): when a
level's session times out (its coordinator did not answer for ``session.timeout.ms``, as
under a broker fault), it rejoins with its ``group.instance.id`` and the broker fences the
member id it still uses, in the same millisecond as its "Consumer group session timed out"
line (or as soon as the coordinator answers again). The fatal error says "fenced by other
consumer with same group.instance.id", but no other consumer holds the id: the chaos soak's
exactly-once members died of it every minute or two. A fence that follows the level's own
session timeout within :data:`_WITHIN_S` is taken for that: the level's consumer is replaced
(as for a lost broker, see ``_renewal``), up to :data:`_RENEWALS` times in
:data:`_RENEWALS_WINDOW_S`; any other fence stays fatal (another live process with the same id
fences without a session timeout of ours, and must not be fenced back and forth). A first
rule, once a minute at most, killed the soak's members: under faults a renewed level's own
session timed out again 34 s later and it fenced itself again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, Message

from priority_kafka.confluent._config import consumer_protocol

__all__ = ["SelfFences"]

# The rejoin follows the session timeout at once, its answer as soon as the coordinator
# answers: the soak's fences came in the same millisecond, a broker frozen past the session
# 2 s after it resumed.
_WITHIN_S = 30.0
# More self-fences than this in the window is a storm nothing here explains: fatal.
_RENEWALS, _RENEWALS_WINDOW_S = 5, 300.0
_FENCED = "fenced by other consumer with same group.instance.id"


class _LevelLog:
    """A level consumer's ``logger`` (librdkafka's lines come in order, served by
    ``consume()``, the fatal line before the fatal event): tells the watch of its session
    timeouts and fatal lines, and passes every line on."""

    __slots__ = ("_fences", "_level", "_target")

    def __init__(self, level: int, target: Any, fences: SelfFences) -> None:
        self._level, self._target, self._fences = level, target, fences

    def log(self, level: int, fmt: str, *args: Any) -> None:
        if args:
            if args[0] == "SESSTMOUT":
                self._fences.timed_out(self._level)
            elif args[0] == "FATAL" and _FENCED in str(args[-1]):
                self._fences.fenced(self._level)
        self._target.log(level, fmt, *args)


class SelfFences:
    """The self-fence watch of a PriorityConsumer's static levels; ``renew(level, reason)``
    replaces a level's consumer at the next ``consume()``."""

    __slots__ = ("_renew", "_renewed", "_timed_out", "pending")

    @classmethod
    def of(cls, librdkafka: Mapping[str, Any], renew: Callable[[int, str], None]) -> SelfFences:
        """The watch of a consumer of ``librdkafka`` properties: it watches only if its levels
        are static members of the classic protocol (those fence themselves)."""
        watching = bool(librdkafka.get("group.instance.id")) and not consumer_protocol(librdkafka)
        return cls(renew if watching else None)

    def __init__(self, renew: Callable[[int, str], None] | None) -> None:
        self._renew = renew
        self._timed_out: dict[int, float] = {}  # level -> its last session timeout
        self._renewed: dict[int, list[float]] = {}  # level -> its self-fence renewals
        #: Self-fences renewed whose fatal error event is still to come out of consume().
        self.pending = 0

    def logger(self, level: int, target: Any) -> Any:
        """Level ``level``'s ``logger``, passing its lines on to ``target`` (``target`` itself
        when not watching)."""
        return target if self._renew is None else _LevelLog(level, target, self)

    def timed_out(self, level: int) -> None:
        """Level ``level``'s session timed out now."""
        self._timed_out[level] = time.monotonic()

    def fenced(self, level: int) -> None:
        """Level ``level`` was fenced for good now: renewed if it fenced itself."""
        now = time.monotonic()
        if now - self._timed_out.get(level, -float("inf")) > _WITHIN_S:
            return  # not right after its own session timeout: a real fence, fatal
        recent = [at for at in self._renewed.get(level, ()) if now - at < _RENEWALS_WINDOW_S]
        if len(recent) >= _RENEWALS:
            return
        self._renewed[level] = [*recent, now]
        self.pending += 1
        assert self._renew is not None  # only a watching instance makes level loggers
        self._renew(level, "was fenced by its own rejoin right after its session timed out "
                           "(librdkafka issue #3437; no other consumer holds its "
                           "group.instance.id)")

    def unfenced(self, messages: list[Message]) -> list[Message]:
        """``messages`` without the fatal fence events of levels being renewed."""
        if not self.pending:
            return messages
        kept = []
        for message in messages:
            error = message.error()
            if (self.pending and error is not None and error.code() == KafkaError._FATAL
                    and _FENCED in error.str()):
                self.pending -= 1
                continue
            kept.append(message)
        return kept
