"""Which queued record a free worker runs next: ordered lanes, and fair shares over priority levels.

:class:`LevelShares` divides handler time between priority levels by weighted fair queueing on
virtual time: every level has a virtual clock that advances by the handler time it used divided
by its weight, and the ready level with the earliest clock runs next, ties going to the higher
level. So when every level is backlogged each gets its weight's share of handler time (none
starves), and a level that was idle and now has work starts level with the busiest one: it runs
at the next free slot instead of waiting behind the others' queues, but it cannot bank credit
while idle and then monopolise the workers.

:class:`LaneQueue` holds the records waiting to run. Records of one lane (see
:mod:`priority_kafka.sharding`) run one at a time in push order; lanes with queued work wait
per level in FIFO order, so partitions and keys of one level take turns.

Pure: no threads or clocks (durations are passed in); the caller serialises access.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Collection, Hashable, Mapping
from numbers import Real
from typing import Generic, TypeVar

from priority_kafka._checks import check_int
from priority_kafka.errors import ConfigError

__all__ = ["LaneQueue", "LevelShares", "Task", "Ticket"]

T = TypeVar("T")

# Weight given to the newest duration in a level's running estimate of its handler time.
_ESTIMATE_GAIN = 0.2


def _check_known(level: int, levels: Mapping[int, object]) -> None:
    if level not in levels:
        raise ConfigError(f"level {level!r} has no weight (levels: {sorted(levels)}).")


class Ticket:
    """One started run: its level and the virtual time charged for it up front."""

    __slots__ = ("charged", "level")

    def __init__(self, level: int, charged: float) -> None:
        self.level = level
        self.charged = charged

    def __repr__(self) -> str:
        return f"Ticket(level={self.level}, charged={self.charged:.6g})"


class LevelShares:
    """Weighted fair share of handler time over priority levels.

    ``weights`` maps each level to its reserved share (any positive scale, e.g. the consumer's
    reserved per-level quotas). A level of weight 0 runs only when no weighted level is ready.
    Each :meth:`pick` charges the level its estimated handler time at once (so concurrent
    workers do not all pick the same level before any finishes); :meth:`finish` replaces the
    estimate by the measured time.
    """

    __slots__ = ("_estimates", "_ready_before", "_system", "_virtual", "_weights")

    def __init__(self, weights: Mapping[int, float]) -> None:
        if not weights:
            raise ConfigError("'weights' must name at least one level (got {}).")
        checked: dict[int, float] = {}
        for level, weight in weights.items():
            check_int("level", level, minimum=0)
            if (
                isinstance(weight, bool)
                or not isinstance(weight, Real)
                or not 0 <= weight < math.inf  # NaN fails this too
            ):
                raise ConfigError(
                    f"weight of level {level} must be a number >= 0 (got {weight!r})."
                )
            checked[level] = float(weight)
        if not any(checked.values()):
            raise ConfigError(
                f"at least one level needs a positive weight (got {dict(weights)!r})."
            )
        total = sum(checked.values())
        self._weights = {level: weight / total for level, weight in checked.items()}
        self._virtual = dict.fromkeys(self._weights, 0.0)
        self._estimates: dict[int, float] = {}
        self._system = 0.0
        self._ready_before: frozenset[int] = frozenset()

    def __repr__(self) -> str:
        shares = ", ".join(f"{level}: {share:.3g}" for level, share in self.shares().items())
        return f"LevelShares({{{shares}}})"

    def shares(self) -> dict[int, float]:
        """Each level's reserved share of handler time (summing to 1), highest level first."""
        return dict(sorted(self._weights.items(), reverse=True))

    def pick(self, ready: Collection[int]) -> Ticket | None:
        """Choose the level to run next among ``ready`` ones (None if none is ready)."""
        for level in ready:
            _check_known(level, self._weights)
        if not ready:
            self._ready_before = frozenset()
            return None
        # A level that just got work starts level with the earliest level that kept its work:
        # it banks no credit while idle, and (ties going up) a higher level runs first.
        kept = [self._virtual[level] for level in ready if level in self._ready_before]
        floor = min(kept) if kept else self._system
        for level in ready:
            if level not in self._ready_before and self._virtual[level] < floor:
                self._virtual[level] = floor
        self._ready_before = frozenset(ready)
        weighted = [level for level in ready if self._weights[level] > 0]
        if weighted:
            level = min(weighted, key=lambda lv: (self._virtual[lv], -lv))
            self._system = self._virtual[level]
        else:
            level = max(ready)
        charged = self._estimate(level)
        self._charge(level, charged)
        return Ticket(level, charged)

    def finish(self, ticket: Ticket, seconds: float) -> None:
        """Account the measured handler time of a run started by :meth:`pick`."""
        seconds = max(0.0, float(seconds))
        self._charge(ticket.level, seconds - ticket.charged)
        previous = self._estimates.get(ticket.level)
        self._estimates[ticket.level] = (
            seconds if previous is None else previous + _ESTIMATE_GAIN * (seconds - previous)
        )

    def _estimate(self, level: int) -> float:
        if level in self._estimates:
            return self._estimates[level]
        if self._estimates:
            return sum(self._estimates.values()) / len(self._estimates)
        return 1.0  # every level gets the same guess until a run was measured

    def _charge(self, level: int, seconds: float) -> None:
        weight = self._weights[level]
        if weight > 0:
            self._virtual[level] += seconds / weight


class Task(Generic[T]):
    """A record taken from a :class:`LaneQueue` to run; hand it back to :meth:`LaneQueue.finish`."""

    __slots__ = ("item", "lane", "ticket")

    def __init__(self, item: T, lane: Hashable, ticket: Ticket) -> None:
        self.item = item
        self.lane = lane
        self.ticket = ticket

    @property
    def level(self) -> int:
        return self.ticket.level

    def __repr__(self) -> str:
        return f"Task(item={self.item!r}, lane={self.lane!r}, level={self.level})"


class LaneQueue(Generic[T]):
    """Queued records by level and lane; at most one record per lane runs at a time.

    Guarantees: records of one lane are returned by :meth:`next` in the order they were pushed,
    and never while another record of that lane is running (between :meth:`next` and
    :meth:`finish`); the level is chosen by :class:`LevelShares`.
    """

    __slots__ = ("_lanes", "_queued", "_ready", "_running", "shares")

    def __init__(self, weights: Mapping[int, float]) -> None:
        self.shares = LevelShares(weights)
        # Lanes with queued records, each with its level and records in push order.
        self._lanes: dict[Hashable, tuple[int, deque[T]]] = {}
        # Per level, the lanes that have queued records and nothing running, in turn order.
        self._ready: dict[int, deque[Hashable]] = {level: deque() for level in weights}
        self._running: set[Hashable] = set()
        self._queued = 0

    def __repr__(self) -> str:
        return f"LaneQueue(queued={self._queued}, running={len(self._running)})"

    @property
    def queued(self) -> int:
        """Records waiting to run."""
        return self._queued

    @property
    def running(self) -> int:
        """Records taken by :meth:`next` and not yet finished."""
        return len(self._running)

    def push(self, level: int, lane: Hashable, item: T) -> None:
        """Queue ``item`` at the end of ``lane`` (which belongs to ``level``)."""
        _check_known(level, self._ready)
        entry = self._lanes.get(lane)
        if entry is None:
            entry = self._lanes[lane] = (level, deque())
            if lane not in self._running:
                self._ready[level].append(lane)
        elif entry[0] != level:
            raise ConfigError(f"lane {lane!r} belongs to level {entry[0]} (got {level}).")
        entry[1].append(item)
        self._queued += 1

    def next(self) -> Task[T] | None:
        """Take the next record to run, or None if every queued record's lane is busy."""
        ticket = self.shares.pick([level for level, lanes in self._ready.items() if lanes])
        if ticket is None:
            return None
        lane = self._ready[ticket.level].popleft()
        items = self._lanes[lane][1]
        item = items.popleft()
        if not items:
            del self._lanes[lane]
        self._queued -= 1
        self._running.add(lane)
        return Task(item, lane, ticket)

    def finish(self, task: Task[T], seconds: float) -> None:
        """Mark ``task`` done after ``seconds`` of handler time; its lane may run again."""
        self._running.discard(task.lane)
        self.shares.finish(task.ticket, seconds)
        if task.lane in self._lanes:
            self._ready[task.level].append(task.lane)

    def discard(self, predicate: Callable[[T], bool]) -> list[T]:
        """Remove and return the queued records for which ``predicate`` is true."""
        dropped: list[T] = []
        for lane, (level, items) in list(self._lanes.items()):
            kept: deque[T] = deque()
            for item in items:
                (dropped if predicate(item) else kept).append(item)
            if kept:
                self._lanes[lane] = (level, kept)
            else:
                del self._lanes[lane]
                if lane not in self._running:
                    self._ready[level].remove(lane)
        self._queued -= len(dropped)
        return dropped
