"""TopicLevels: which level topics exist on the broker, for the producers' check before a send.

A producer must never create a level topic by sending to it (the broker auto-creates a topic
a producer names, and no consumer reads a level above its ``max_priority``). Each producer
asks the cluster for every topic name (a request for all topics creates none) when it first
routes a topic, again when a send names a level topic not seen (at most once per
``MIN_REFRESH_S``) and when its answer is older than ``MAX_AGE_S``; sends to known levels are
a dict look-up in the producer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from priority_kafka.errors import MissingTopicsError
from priority_kafka.naming import existing_levels

__all__ = ["MAX_AGE_S", "MIN_REFRESH_S", "RETRY_S", "TopicLevels"]

#: How long a list of topics is trusted (kafka-python's and librdkafka's metadata max age).
MAX_AGE_S = 300.0
#: The least time between two look-ups for a level not seen: a loop sending to a missing level
#: gets its error from the last answer rather than asking the cluster on every send.
MIN_REFRESH_S = 1.0
#: How long the last list serves when a refresh of a stale one failed.
RETRY_S = 30.0

_log = logging.getLogger(__name__)


class TopicLevels:
    """The topic names ``fetch()`` lists, refreshed when stale or on a miss."""

    __slots__ = ("_at", "_fetch", "_names")

    def __init__(self, fetch: Callable[[], Iterable[str]]) -> None:
        self._fetch = fetch
        self._names: frozenset[str] = frozenset()
        self._at = -float("inf")

    def fresh_until(self) -> float:
        """The ``time.monotonic()`` after which what was checked must be checked again."""
        return self._at + MAX_AGE_S

    def check(self, topic: str, level: int) -> list[int]:
        """Raise MissingTopicsError, naming the levels ``topic`` has, unless its level topic
        ``<topic>-<level>`` exists; return the levels it has."""
        if self.due(topic, level):
            try:
                names = self._fetch()
            except Exception as exc:
                self.failed(topic, level, exc)
            else:
                self.fetched(names)
        return self.known(topic, level)

    def due(self, topic: str, level: int) -> bool:
        """Whether the topic list must be asked for again before ``<topic>-<level>`` is
        checked (a caller that fetches it itself, asynchronously, then gives it to
        :meth:`fetched`, or its failure to :meth:`failed`)."""
        now = time.monotonic()
        return now > self._at + MAX_AGE_S or (
            f"{topic}-{level}" not in self._names and now >= self._at + MIN_REFRESH_S
        )

    def fetched(self, names: Iterable[str]) -> None:
        """The cluster's topic names, just asked for."""
        self._names = frozenset(names)
        self._at = time.monotonic()

    def failed(self, topic: str, level: int, exc: Exception) -> None:
        """The topic list could not be asked for: raise ``exc`` unless ``<topic>-<level>`` is
        known to exist (then the last list serves ``RETRY_S`` more, with a warning)."""
        if f"{topic}-{level}" not in self._names:
            raise exc
        # Only stale, and known to exist: a cluster that cannot answer now (a broker
        # restarting) does not fail sends the client itself would buffer and retry.
        _log.warning("could not refresh the topic list (%s); using the last one, "
                     "again for %.0f s", exc, RETRY_S)
        self._at = time.monotonic() - MAX_AGE_S + RETRY_S

    def known(self, topic: str, level: int) -> list[int]:
        """:meth:`check` on the list as it is: the levels ``topic`` has, or MissingTopicsError
        naming them unless ``<topic>-<level>`` is among them."""
        name = f"{topic}-{level}"
        levels = existing_levels(topic, self._names)
        if name not in self._names:
            if not levels:
                has = "has no level topics"
            elif levels == list(range(len(levels))):
                has = f"has levels {topic}-0..{topic}-{levels[-1]}"
            else:
                has = f"has levels {', '.join(f'{topic}-{n}' for n in levels)}"
            raise MissingTopicsError(
                f"{name} does not exist ({topic!r} {has} on the broker); nothing was sent "
                f"(sending would create a topic no consumer reads). Create the levels with "
                f"`priority-kafka topics create {topic} --max-priority {level + 1}`, or send "
                f"with a priority the topic has."
            )
        return levels
