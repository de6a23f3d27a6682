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
per level in FIFO order, so partitions and keys of one level take turns. A worker takes a
*batch*: records of one level, lane after lane up to a count (from one record for slow handlers
to hundreds for fast ones), so the hand-off costs once per batch rather than once per record.

Pure: no threads or clocks (durations are passed in); the caller serialises access.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from numbers import Real
from typing import Any

from priority_kafka._checks import check_int
from priority_kafka.errors import ConfigError
from priority_kafka.sharding import Ordering, check_ordering

__all__ = ["Batch", "Lane", "LaneQueue", "LevelShares", "Run", "Ticket"]

# Idle lanes a source keeps (so its keys seen again cost no new lane) before they are swept.
_LANES_KEPT = 4096
# Weight given to the newest duration in a level's running estimate of its handler time.
_ESTIMATE_GAIN = 0.2


def _check_known(level: int, levels: Mapping[int, object]) -> None:
    if level not in levels:
        raise ConfigError(f"level {level!r} has no weight (levels: {sorted(levels)}).")


class Ticket:
    """One started batch: its level and the virtual time charged for it up front."""

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
    :meth:`pick` chooses a level, :meth:`charge` charges it the estimated handler time of the
    records taken at once, and :meth:`finish` replaces the estimate by the measured time.
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
        if len(ready) == 1:
            return self._pick_only(next(iter(ready)))
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
        return Ticket(level, 0.0)

    def _pick_only(self, level: int) -> Ticket:
        """:meth:`pick` with one ready level (a plain consumer's every pick), the same rules
        without building the collections they need for several."""
        _check_known(level, self._weights)
        before = self._ready_before
        if level not in before:
            # It just got work: it starts level with the system clock.
            if self._virtual[level] < self._system:
                self._virtual[level] = self._system
            self._ready_before = frozenset((level,))
        elif len(before) != 1:
            self._ready_before = frozenset((level,))
        if self._weights[level] > 0:
            self._system = self._virtual[level]
        return Ticket(level, 0.0)

    def charge(self, ticket: Ticket, records: int) -> None:
        """Charge the level of ``ticket`` the estimated time of the ``records`` it took, at once
        (so concurrent workers do not all pick the same level before any finishes)."""
        charged = records * self.estimate(ticket.level)
        ticket.charged += charged
        self._charge(ticket.level, charged)

    def finish(self, ticket: Ticket, seconds: float, records: int = 1) -> None:
        """Account the measured handler time of the ``records`` run under ``ticket``."""
        seconds = max(0.0, float(seconds))
        self._charge(ticket.level, seconds - ticket.charged)
        if records <= 0:
            return
        each = seconds / records
        previous = self._estimates.get(ticket.level)
        self._estimates[ticket.level] = (
            each if previous is None else previous + _ESTIMATE_GAIN * (each - previous)
        )

    def estimate(self, level: int) -> float:
        """The handler time one record of ``level`` is expected to take."""
        if level in self._estimates:
            return self._estimates[level]
        if self._estimates:
            return sum(self._estimates.values()) / len(self._estimates)
        return 1.0  # every level gets the same guess until a run was measured

    def fastest(self) -> float:
        """The handler time one record of the fastest measured level is expected to take (1 s
        until a run was measured)."""
        return min(self._estimates.values(), default=1.0)

    def _charge(self, level: int, seconds: float) -> None:
        weight = self._weights[level]
        if weight > 0:
            self._virtual[level] += seconds / weight


class Lane:
    """Records of one source (partition) that run one at a time, in push order (``shared``:
    an ``"unordered"`` source's one lane, whose records any number of workers may run at once).

    ``group`` is what the records' completions count towards (the partition's current epoch);
    :meth:`LaneQueue.discard` sets it to None, so a worker holding its records stops.
    """

    __slots__ = ("claimed", "group", "items", "key", "level", "ready", "shared", "source")

    def __init__(
        self, source: Hashable, key: Hashable, level: int, group: object, shared: bool
    ) -> None:
        self.source = source
        self.key = key
        self.level = level
        self.group = group
        self.shared = shared
        self.items: list[Any] = []
        self.claimed = False  # a worker holds its records (never for a shared lane)
        self.ready = False  # in its level's ready queue

    def __repr__(self) -> str:
        return f"Lane({self.source!r}, key={self.key!r}, queued={len(self.items)})"


#: Records of one lane taken by a worker: the lane, the group its records count towards, and
#: how many of the batch's records (in order) are the lane's.
Run = tuple[Lane, object, int]


class Batch:
    """What :meth:`LaneQueue.take` hands a worker: records of one level, lane after lane.

    ``records`` holds them in run order; the worker takes each with ``popleft()``, and whatever
    is left when the batch is handed back (or stolen by :meth:`LaneQueue.steal` meanwhile, from
    the other end) goes back to its lanes. Each pop is atomic, so every record goes to exactly
    one side without a lock.
    """

    __slots__ = ("count", "records", "released", "runs", "stolen", "ticket")

    def __init__(self, ticket: Ticket, runs: list[Run], records: deque[Any]) -> None:
        self.ticket = ticket
        self.runs = runs
        self.records = records
        self.count = len(records)
        self.stolen = 0  # records taken back by steal()
        self.released = 0  # runs, from the end, whose lanes steal() freed

    @property
    def level(self) -> int:
        return self.ticket.level

    def __repr__(self) -> str:
        return f"Batch(level={self.level}, runs={len(self.runs)}, records={self.count})"


class LaneQueue:
    """Queued records by level and lane; a worker takes a batch of runs and hands it back.

    Records come per source (a partition) with an ordering mode (see
    :mod:`priority_kafka.sharding`): ``"key"`` gives each key (a record's ``key`` attribute) its
    own lane, ``"partition"`` the whole source one lane, ``"unordered"`` one shared lane.

    Guarantees: records of one lane are taken in the order they were pushed, and never while
    another worker holds records of that lane (between :meth:`take` and :meth:`finish`), except
    for a shared lane; records a worker did not run go back to the head of their lane; the level
    of each batch is chosen by :class:`LevelShares`.
    """

    __slots__ = ("_ordering", "_queued", "_ready", "_sweep_at", "_tables", "_taken", "shares")

    def __init__(self, weights: Mapping[int, float], ordering: Ordering = "key") -> None:
        self.shares = LevelShares(weights)
        self._ordering = check_ordering(ordering)
        # Per source, its lanes by key (None: the source's one lane); idle ones are kept until
        # the table holds more than the source's _sweep_at.
        self._tables: dict[Hashable, dict[Hashable, Lane]] = {}
        self._sweep_at: dict[Hashable, int] = {}
        # Per level, the lanes that have queued records and no worker, in turn order.
        self._ready: dict[int, deque[Lane]] = {level: deque() for level in weights}
        self._queued = 0
        self._taken = 0

    def __repr__(self) -> str:
        return f"LaneQueue(queued={self._queued}, taken={self._taken})"

    @property
    def queued(self) -> int:
        """Records waiting to be taken."""
        return self._queued

    @property
    def taken(self) -> int:
        """Records taken by :meth:`take` and not yet handed back by :meth:`finish`."""
        return self._taken

    def has_ready(self) -> bool:
        """Whether :meth:`take` would return a batch."""
        return any(self._ready.values())

    def push(self, level: int, source: Hashable, group: object, items: Sequence[Any]) -> None:
        """Queue ``items`` of ``source`` (which belongs to ``level``) at the end of their lanes;
        their completions count towards ``group``."""
        _check_known(level, self._ready)
        table = self._tables.get(source)
        if table is None:
            table = self._tables[source] = {}
        ready = self._ready[level]
        if self._ordering == "key":
            for item in items:
                key = item.key
                lane = table.get(key)
                if lane is None:
                    lane = table[key] = Lane(source, key, level, group, False)
                    if len(table) > self._sweep_at.get(source, _LANES_KEPT):
                        self._sweep(source, table)
                queued = lane.items
                if queued:  # ready or held, with records of this epoch (discard empties it)
                    queued.append(item)
                    continue
                queued.append(item)
                # A lane kept from an earlier epoch, or held by a worker: the new records wait
                # for that worker, and count for this epoch.
                lane.group = group
                if not lane.claimed:
                    lane.ready = True
                    ready.append(lane)
        else:
            lane = table.get(None)
            if lane is None:
                lane = table[None] = Lane(
                    source, None, level, group, self._ordering == "unordered"
                )
            lane.group = group
            lane.items.extend(items)
            if not lane.ready and not lane.claimed:
                lane.ready = True
                ready.append(lane)
        self._queued += len(items)

    def take(self, limit: int | Callable[[int], int]) -> Batch | None:
        """Take up to ``limit`` records (at least one; a callable gets the chosen level) of the
        level :class:`LevelShares` picks, lane after lane; None if nothing is ready."""
        ticket = self.shares.pick([level for level, lanes in self._ready.items() if lanes])
        if ticket is None:
            return None
        room = max(1, limit(ticket.level) if callable(limit) else limit)
        lanes = self._ready[ticket.level]
        runs: list[Run] = []
        records: deque[Any] = deque()
        # Locals: a key lane often holds one record, so this loop runs once per record.
        add_run, add_records, next_lane = runs.append, records.extend, lanes.popleft
        while lanes and room:
            lane = lanes[0]
            queued = lane.items
            if len(queued) <= room:
                add_records(queued)
                add_run((lane, lane.group, len(queued)))
                room -= len(queued)
                lane.items = []
            else:
                add_records(queued[:room])
                add_run((lane, lane.group, room))
                del queued[:room]
                room = 0
            if lane.shared:
                if lane.items:
                    lanes.rotate(-1)  # the rest stays ready for other workers, after others
                else:
                    next_lane()
                    lane.ready = False
            else:
                next_lane()
                lane.ready = False
                lane.claimed = True
        batch = Batch(ticket, runs, records)
        self._queued -= batch.count
        self._taken += batch.count
        self.shares.charge(ticket, batch.count)
        return batch

    def finish(self, batch: Batch, seconds: float) -> int:
        """Hand ``batch`` back after ``seconds`` of handler time: the records its worker did not
        take go back to the head of their lanes (unless a lane was discarded meanwhile), and its
        lanes may run again. Returns how many records the worker took."""
        returned = self._give_back(batch, release=False)
        for lane, _, _ in batch.runs[: len(batch.runs) - batch.released]:
            lane.claimed = False
            if lane.items and not lane.ready:
                lane.ready = True
                self._ready[lane.level].append(lane)
        ran = batch.count - batch.stolen - returned
        self._taken -= batch.count - batch.stolen
        self.shares.finish(batch.ticket, seconds, ran)
        return ran

    def steal(self, batch: Batch) -> int:
        """Take back the records of ``batch`` its worker has not started (it is stuck in one):
        they go back to their lanes, and the lanes it no longer holds any record of are freed
        for other workers. Returns how many."""
        return self._give_back(batch, release=True)

    def _give_back(self, batch: Batch, release: bool) -> int:
        """Pop the records left in ``batch`` (from the end, so a worker popping the other end
        meanwhile never gets one of them) back to the head of their lanes."""
        records, taken = batch.records, []
        if not records and not release:  # the common end of a batch: nothing left to give
            return 0
        while True:
            try:
                taken.append(records.pop())
            except IndexError:
                break
        suffix = taken[::-1]  # in batch order: the last records of the last runs
        end = len(suffix)
        index = len(batch.runs) - batch.released
        freed: list[Lane] = []
        while end:
            index -= 1
            lane, group, count = batch.runs[index]
            back = min(end, count)
            if lane.group is group:
                lane.items[:0] = suffix[end - back: end]
                self._queued += back
            end -= back
            if release and (back == count or lane.shared):
                # The worker holds nothing of this lane any more (a shared lane it never holds):
                # free it now.
                batch.released += 1
                lane.claimed = False
                freed.append(lane)
        for lane in reversed(freed):  # in batch order, so the lanes keep their turns
            if lane.items and not lane.ready:
                lane.ready = True
                self._ready[lane.level].append(lane)
        if release:
            batch.stolen += len(taken)
            self._taken -= len(taken)
        return len(taken)

    def _sweep(self, source: Hashable, table: dict[Hashable, Lane]) -> None:
        """Drop the idle lanes of ``source`` (kept so a key seen again costs no new lane), and
        sweep again once the table has grown as much again: amortised O(1) per lane."""
        for key, lane in list(table.items()):
            if not (lane.items or lane.claimed):
                del table[key]
        self._sweep_at[source] = 2 * len(table) + _LANES_KEPT

    def discard(self, sources: Collection[Hashable] | None = None) -> int:
        """Drop the queued records of ``sources`` (None: all); return how many. Workers holding
        records of their lanes stop before the next one and give none back."""
        dropped = 0
        for source, table in list(self._tables.items()):
            if sources is not None and source not in sources:
                continue
            for key, lane in list(table.items()):
                dropped += len(lane.items)
                lane.items = []
                lane.group = None
                lane.ready = False
                if not lane.claimed:
                    del table[key]
        if dropped:
            for level, lanes in self._ready.items():
                self._ready[level] = deque(lane for lane in lanes if lane.ready)
        self._queued -= dropped
        return dropped
