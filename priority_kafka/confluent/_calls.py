"""LevelCalls: a confluent PriorityConsumer's calls that take priority-topic partitions, each
made on the consumer of the level that owns them.

``pause([TopicPartition("orders-2", 0), TopicPartition("orders-0", 1)])`` becomes a ``pause``
on level 2's consumer and one on level 0's; ``committed`` asks each level for its partitions
and returns the answers in the order given. A partition of no level (not a priority topic, or
a level outside ``max.priority``) is an InvalidArgError before any level is called
(:meth:`~priority_kafka._levels.LevelRouter.group`). The front-end holds one, handed the levels
and its open check (as the kafka-python front-end's ``consumer/_calls.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from confluent_kafka import Consumer, TopicPartition

from priority_kafka._checks import shown
from priority_kafka._levels import LevelRouter
from priority_kafka.confluent._config import InvalidArgError, invalid_arg
from priority_kafka.confluent._renewal import Level

__all__ = ["LevelCalls"]


class LevelCalls:
    """Routes calls over ``by_level`` by ``router``; ``check_open`` raises once the front-end
    is closed, before any level is called."""

    __slots__ = ("_by_level", "_check_open", "_router")

    def __init__(
        self, by_level: Mapping[int, Level], router: LevelRouter, check_open: Callable[[], None]
    ) -> None:
        self._by_level = by_level
        self._router = router
        self._check_open = check_open

    def level(self, number: object) -> Level:
        """Level ``number``; InvalidArgError naming the levels for any other value."""
        self._check_open()
        lv = self._by_level.get(number) if type(number) is int else None
        if lv is None:
            raise InvalidArgError(
                f"level must be one of this consumer's levels {sorted(self._by_level)} "
                f"(got {shown(number)})"
            )
        return lv

    def level_of(self, topic: str | None) -> Level:
        """The level that owns a priority topic."""
        self._check_open()
        with invalid_arg():
            return self._by_level[self._router.level_of(topic or "")]

    def group(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """``partitions`` by level, each checked before any is returned."""
        self._check_open()
        with invalid_arg():
            return self._router.group(partitions)

    def each(
        self, method: str, partitions: Iterable[TopicPartition], keyword: str | None = None
    ) -> None:
        """``consumer.method(its partitions)`` (or as ``keyword``) on each level given some."""
        for level, group in self.group(partitions).items():
            call = getattr(self._by_level[level].consumer, method)
            call(**{keyword: group}) if keyword else call(group)

    def assign(
        self, partitions: Iterable[TopicPartition], rebalancing: Level | None, renewing: bool
    ) -> None:
        """Assign ``partitions``, each to its level (while ``rebalancing`` runs a rebalance
        callback: that level's, which may be given only its own); outside a callback, levels
        given none are unassigned. Checked, then nothing done while levels are ``renewing``."""
        groups = self.group(partitions)
        if renewing:
            return
        for lv in self._affected(groups, rebalancing):
            group = groups.get(lv.level)
            if group is not None or lv is rebalancing:
                lv.consumer.assign(group or [])
            else:
                lv.consumer.unassign()

    def unassign(self, rebalancing: Level | None, renewing: bool) -> None:
        """Drop every level's assignment (while ``rebalancing`` runs a rebalance callback:
        that level's); nothing while levels are ``renewing``."""
        self._check_open()
        if renewing:
            return
        for lv in self._affected({}, rebalancing):
            lv.consumer.unassign()

    def _affected(
        self, groups: Mapping[int, list[TopicPartition]], rebalancing: Level | None
    ) -> Iterable[Level]:
        """The levels an assign-style call changes: all, or only the rebalancing one."""
        if rebalancing is None:
            return self._by_level.values()
        strays = set(groups) - {rebalancing.level}
        if strays:
            raise InvalidArgError(
                f"a rebalance callback of level {rebalancing.level} may assign only its "
                f"level's partitions (got partitions of level(s) {sorted(strays)})."
            )
        return [rebalancing]

    def gather(
        self,
        partitions: Sequence[TopicPartition],
        call: Callable[[Consumer, list[TopicPartition]], list[TopicPartition]],
    ) -> list[TopicPartition]:
        """Run ``call`` per level on its partitions; the results in the order given."""
        self._check_open()
        with invalid_arg():
            return self._router.gather(
                partitions,
                lambda level, group: call(self._by_level[level].consumer, group),
                key=lambda tp: (tp.topic, tp.partition),
            )
