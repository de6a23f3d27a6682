"""LevelRouter: which level a priority topic belongs to, and each level's client ids (pure);
LevelFigures: one level's bookkeeping as both PriorityConsumers publish it; PriorityFront: the
level settings and :class:`~priority_kafka._types.Levels` every priority consumer shows.

Both PriorityConsumers (kafka-python's and confluent's) hold one client per level and send
every partition-level call to the level that owns the partition; they route through this one
object, so the level of a topic, its one error, the grouping of partitions by level and the
per-level group, client and static-member ids are written once for both families. Only the
key style differs: kafka-python's ``group_id`` against librdkafka's ``group.id``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

import attrs

from priority_kafka._checks import MAX_PRIORITY, check_int
from priority_kafka._types import Levels
from priority_kafka.burst import CapacityBurst
from priority_kafka.errors import ConfigError
from priority_kafka.naming import level_group_id, split_priority_topic

if TYPE_CHECKING:
    from priority_kafka.config import PriorityConfig

__all__ = [
    "HasLevelFigures", "KeyStyle", "LevelFigures", "LevelRouter", "PriorityFront",
    "ProducerFront", "Published",
    "capacity_burst", "figures_of", "publish",
]

T = TypeVar("T")
R = TypeVar("R")

#: How a client family spells its settings: kafka-python's ``group_id`` or librdkafka's
#: ``group.id``.
KeyStyle = Literal["kafka-python", "librdkafka"]

# Per key style: the group id (the level's group, ``<group>-<level>``) and the ids that get a
# ``-<level>`` suffix (two members of one process must not share a client or static-member id).
_IDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "kafka-python": ("group_id", ("client_id", "group_instance_id")),
    "librdkafka": ("group.id", ("client.id", "group.instance.id")),
}


def _topic(partition: Any) -> str:
    topic: str = partition.topic
    return topic


def _check_max_priority(instance: object, attribute: object, value: int) -> None:
    check_int("max_priority", value, minimum=1, maximum=MAX_PRIORITY)


@attrs.frozen
class LevelRouter:
    """The levels ``max_priority - 1 .. 0`` and the routing of topics and settings to them."""

    max_priority: int = attrs.field(validator=_check_max_priority)

    @property
    def highest_first(self) -> range:
        """The level numbers, highest first (``Levels``, a consumer's ``levels``, is its shares)."""
        return range(self.max_priority - 1, -1, -1)

    def level_of(self, topic: str) -> int:
        """The level of a priority topic (``"orders-2"`` -> 2).

        Raises ConfigError for a name without a level suffix or a level outside
        ``[0, max_priority)``, naming the topic.
        """
        _, level = split_priority_topic(topic)
        if level >= self.max_priority:
            raise ConfigError(
                f"Topic {topic!r} has priority {level}, outside [0, {self.max_priority})."
            )
        return level

    def group(
        self, partitions: Iterable[T], topic: Callable[[T], str] = _topic
    ) -> dict[int, list[T]]:
        """``partitions`` by level (``topic`` reads a partition's topic), each in the order given.

        Checks every partition before returning, so a bad one leaves no level half-called.
        """
        groups: dict[int, list[T]] = {}
        for tp in partitions:
            groups.setdefault(self.level_of(topic(tp)), []).append(tp)
        return groups

    def gather(
        self,
        partitions: Iterable[T],
        call: Callable[[int, list[T]], Iterable[R]],
        key: Callable[[Any], object],
    ) -> list[R]:
        """Run ``call(level, group)`` per level; its results in the order of ``partitions``.

        ``key`` matches a result to its partition (for example ``(topic, partition)``).
        """
        given = list(partitions)
        found: dict[object, R] = {}
        for level, group in self.group(given).items():
            for result in call(level, group):
                found[key(result)] = result
        return [found[key(tp)] for tp in given]

    def level_config(
        self,
        configs: Mapping[str, Any],
        level: int,
        style: KeyStyle,
        defaults: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Level ``level``'s client settings: ``defaults`` under ``configs``, its own group
        (``<group>-<level>``) and its own client and static-member ids (``<id>-<level>``).

        A missing or None id stays as it is; the caller's mapping is not changed.
        """
        group_key, id_keys = _IDS[style]
        level_configs = {**(defaults or {}), **configs}
        if level_configs.get(group_key) is not None:
            level_configs[group_key] = level_group_id(level_configs[group_key], level)
        for key in id_keys:
            if level_configs.get(key) is not None:
                level_configs[key] = f"{level_configs[key]}-{level}"
        return level_configs

    def __repr__(self) -> str:
        return f"LevelRouter(max_priority={self.max_priority})"


@attrs.frozen
class LevelFigures:
    """One priority level's bookkeeping, as a PriorityConsumer's polling thread last published
    it: immutable, so any thread reads it without a lock."""

    #: The level's share of ``max_poll_records``.
    reserved_quota: int
    #: Its record limit in the last poll (kafka-python) or round (confluent), burst included.
    last_quota: int
    #: What its last ``window_size`` polls or rounds returned, oldest first.
    window: tuple[int, ...]
    #: How many polls or rounds let it burst.
    burst_count: int
    #: Records returned to the caller so far.
    records_returned: int
    #: Records fetched into Python but not yet returned (always 0 on confluent, which fetches
    #: nothing ahead of the caller).
    records_prefetched: int
    #: Rejoins forced because its group stopped progressing (kafka-python; 0 on confluent,
    #: where librdkafka rejoins by itself).
    stalled_rebalances: int
    #: Its partitions paused through the consumer.
    paused_partitions: int


@runtime_checkable
class HasLevelFigures(Protocol):
    """A consumer that publishes :class:`LevelFigures` per level."""

    @property
    def level_figures(self) -> Mapping[int, LevelFigures]: ...


#: What a polling thread publishes, each part fresh and never changed afterwards: the burst
#: (for its fixed reserved quotas), its history(), then last quotas, returned, prefetched,
#: stalls and paused, each keyed by level (a missing level counts 0).
Published = tuple[
    CapacityBurst, tuple[tuple[tuple[int, ...], ...], int, tuple[int, ...]],
    Mapping[int, int], Mapping[int, int], Mapping[int, int], Mapping[int, int], Mapping[int, int],
]


def publish(burst: CapacityBurst, last_quotas: Mapping[int, int], returned: Mapping[int, int],
            prefetched: Mapping[int, int], stalls: Mapping[int, int],
            paused: Mapping[int, int]) -> Published:
    """Capture the figures' inputs on the polling thread: copies cheap enough for every poll or
    round (the LevelFigures are built by :func:`figures_of`, on the reading thread)."""
    return (burst, burst.history(), last_quotas, returned, prefetched, stalls, paused)


def figures_of(published: Published) -> Mapping[int, LevelFigures]:
    """The levels' figures of one publication, highest level first, read-only."""
    burst, (windows, oldest, bursts), last_quotas, returned, prefetched, stalls, paused = (
        published
    )
    return MappingProxyType({
        level: LevelFigures(
            reserved_quota=reserved,
            last_quota=last_quotas.get(level, 0),
            window=windows[level][oldest:] + windows[level][:oldest],
            burst_count=bursts[level],
            records_returned=returned.get(level, 0),
            records_prefetched=prefetched.get(level, 0),
            stalled_rebalances=stalls.get(level, 0),
            paused_partitions=paused.get(level, 0),
        )
        for level, reserved in burst.reserved.items()
    })


def capacity_burst(config: PriorityConfig) -> CapacityBurst:
    """Fresh history windows and burst rule for ``config`` (one per consumer)."""
    return CapacityBurst(
        config.reserved_quotas(),
        window_size=config.max_poll_history_window_size,
        maxout_threshold=config.min_poll_window_maxout_threshold,
    )


class PriorityFront:
    """The priority settings every priority consumer shows, read-only: a base of each family's
    PriorityConsumer and of the share consumer, which set ``_config`` and ``_reserved`` (the
    distributor's split) on creation and define ``priority_of``."""

    __slots__ = ()

    _config: PriorityConfig
    _reserved: dict[int, int]

    if TYPE_CHECKING:
        def priority_of(self, topic: str) -> int: ...

    @property
    def levels(self) -> Levels:
        """The priority levels, as :class:`~priority_kafka.ShardedExecutor` weighs them: each
        level's reserved share (:attr:`reserved_quotas`) and ``priority_of``."""
        return Levels(self.reserved_quotas, self.priority_of)

    @property
    def max_priority(self) -> int:
        """Number of priority levels."""
        return self._config.max_priority

    @property
    def config(self) -> PriorityConfig:
        """The priority settings in force."""
        return self._config

    @property
    def reserved_quotas(self) -> dict[int, int]:
        """Each level's reserved share of ``max_poll_records`` (``max.poll.records``), highest
        level first (a copy)."""
        return dict(self._reserved)


class ProducerFront:
    """The level settings every family's PriorityProducer shows, read-only: a base of each,
    which sets ``_max_priority`` and ``_default_priority`` on creation."""

    __slots__ = ()

    _max_priority: int
    _default_priority: int

    @property
    def max_priority(self) -> int:
        """Number of priority levels."""
        return self._max_priority

    @property
    def default_priority(self) -> int:
        """The level a send given no priority goes to."""
        return self._default_priority
