"""What a kafka-python PriorityConsumer reads: logical topics, a pattern, or assigned partitions.

The facade keeps one :class:`Subscription`; it turns a logical subscription into each level's
(``orders`` -> ``orders-2`` on level 2, a pattern into each level's pattern), applies a manual
assignment level by level, and says which levels ``poll()`` serves. Polling thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from priority_kafka._checks import shown
from priority_kafka._rebalance import ChainedListener, check_listener
from priority_kafka.config import normalize_keys
from priority_kafka.errors import ConfigError, IllegalStateError
from priority_kafka.kafka_python._kafka import TopicPartition
from priority_kafka.kafka_python.consumer._level import Level
from priority_kafka.naming import common_levels, level_pattern, priority_topic, split_priority_topic

__all__ = ["Subscription", "topic_names", "with_discovered_levels"]


def topic_names(topics: object) -> tuple[str, ...]:
    """``subscribe()``'s topics argument as a tuple: a str or an iterable of str, else a
    ConfigError naming it."""
    if isinstance(topics, str):
        return (topics,)
    names: tuple[object, ...] | None = None
    if isinstance(topics, Iterable):
        names = tuple(topics)
    if names is None or not all(isinstance(name, str) for name in names):
        raise ConfigError(
            f"'topics' must be a str or an iterable of str (got {shown(topics)})."
        )
    return names  # type: ignore[return-value]  # every one a str, checked above


def with_discovered_levels(
    topics: tuple[str, ...], configs: dict[str, Any], list_topics: Callable[[], Iterable[str]]
) -> dict[str, Any]:
    """``configs`` with ``max_priority`` set to the levels ``topics`` have on the broker, when
    it is not given and there are topics to discover it from (each must have as many)."""
    if normalize_keys(configs).get("max_priority") is not None or not topics:
        return configs
    levels = common_levels(topics, list_topics(), advice="subscribe a consumer per number of "
                           "levels, or give 'max_priority'")
    return {**configs, "max_priority": levels}


class Subscription:
    """The logical topics or pattern subscribed to, or the levels given partitions by hand."""

    __slots__ = ("_assigned_levels", "_levels", "pattern", "topics")

    def __init__(self, levels: Mapping[int, Level]) -> None:
        self._levels = levels
        #: The logical topics subscribed to (empty with a pattern or an assignment).
        self.topics: tuple[str, ...] = ()
        self.pattern: str | None = None
        self._assigned_levels: set[int] = set()

    def subscribe(self, names: Sequence[str], pattern: str | None, listener: Any) -> None:
        """Subscribe every level to its topics of ``names``, or to its form of ``pattern``."""
        if bool(names) == (pattern is not None):
            raise ConfigError("subscribe() takes either topics or a pattern, not both or neither.")
        check_listener(listener)
        for number, level in self._levels.items():
            chain = ChainedListener(level, listener)
            if pattern is not None:
                level.consumer.subscribe(pattern=level_pattern(pattern, number), listener=chain)
            else:
                level.consumer.subscribe(
                    topics=[priority_topic(t, number) for t in names], listener=chain
                )
            level.gate.subscribed()
        self.topics, self.pattern = tuple(names), pattern
        self._assigned_levels = set()

    def assign(self, by_level: Mapping[int, Sequence[TopicPartition]]) -> None:
        """Assign each level its partitions; a level given none reads nothing."""
        for number, level in self._levels.items():
            if number in by_level:
                level.consumer.assign(list(by_level[number]))
            else:
                level.consumer.unsubscribe()
            level.gate.assigned_manually()
        self.topics, self.pattern = (), None
        self._assigned_levels = set(by_level)

    def unsubscribe(self) -> None:
        """Unsubscribe every level and drop manual assignments."""
        for level in self._levels.values():
            level.consumer.unsubscribe()
        self.topics, self.pattern, self._assigned_levels = (), None, set()

    def logical_topics(self) -> set[str] | None:
        """The logical topics subscribed to (for a pattern: those it currently matches)."""
        if self.pattern is None:
            return set(self.topics) or None
        matched: set[str] = set()
        for level in self._levels.values():
            matched.update(split_priority_topic(t)[0] for t in level.consumer.subscription() or ())
        return matched

    def active(self) -> list[Level]:
        """The levels ``poll()`` serves, highest first: all when subscribed (a pattern may match
        nothing yet), else those assigned partitions."""
        subscribed = bool(self.topics) or self.pattern is not None
        active = [
            level
            for number, level in self._levels.items()
            if subscribed or number in self._assigned_levels
        ]
        if not active:
            raise IllegalStateError(
                "PriorityConsumer is not subscribed to any topic nor assigned any partition."
            )
        return active
