"""Capacity burst: lend the unused quota of idle levels to one busy level (pure: no I/O).

Each level ``i`` has a reserved quota ``q_i`` (the distributor's split of ``max_poll_records``)
and a FIFO window of the record counts its last ``window_size`` polls returned, pre-filled
with zeros. Before every poll :meth:`CapacityBurst.quotas` applies the rule:

- a poll is *maxed out* for level ``i`` when its count ``>= q_i`` (the reserved quota, never a
  burst quota; so every poll of a level reserved 0 records is maxed out);
- level ``i`` is *eligible* when at least ``maxout_threshold`` slots of its window are maxed out;
- the *unused capacity* of level ``j`` is ``max(0, q_j - max(window_j))``;
- walking from the highest level down, the first eligible level takes ``b`` = the unused
  capacity of all other levels and, if ``b > 0``, polls ``q_i + b``. Only that level bursts; if
  the highest eligible level has ``b == 0`` no lower level bursts either.

So the quotas of one poll sum to ``sum(reserved) + b`` where ``b`` is capacity the other levels
have provably not needed for a whole window; a level that is busy again stops lending at once.

When those quotas add up to more than one poll may return, :func:`allocate` decides who gives
way: the borrower first. The kafka-python PriorityConsumer (per ``poll()``) and the Spark source
(per trigger) use it; the confluent PriorityConsumer, which hands a round out in pieces as its
caller asks, uses :class:`Round`, the same rule in streaming form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

import attrs

from priority_kafka._checks import (
    MAX_PRIORITY,
    MAX_RECORDS,
    MAX_WINDOW,
    check_int,
    shown,
)
from priority_kafka.errors import ConfigError

__all__ = ["CapacityBurst", "Round", "allocate"]

T = TypeVar("T")


def _levels_mapping(name: str, value: object, max_priority: int | None) -> dict[int, int]:
    """Return ``value`` as ``{level: non-negative int}``, checking it is a Mapping.

    With ``max_priority`` given, keys must be levels below it; otherwise (``reserved``) the
    keys must be exactly ``0 .. len - 1``.
    """
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name!r} must be a Mapping of level to count (got {shown(value)}).")
    limit = len(value) if max_priority is None else max_priority
    if limit > MAX_PRIORITY:
        raise ConfigError(
            f"{name!r} must have at most {MAX_PRIORITY} levels (got {len(value)} levels)."
        )
    result: dict[int, int] = {}
    for level, count in value.items():
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < limit:
            levels = "exactly" if max_priority is None else "in"
            raise ConfigError(
                f"{name!r} keys must be levels {levels} 0..{limit - 1} (got {shown(value)})."
            )
        # Bounded so that the int64 history and its sums cannot overflow.
        result[level] = check_int(f"{name}[{level}]", count, minimum=0, maximum=MAX_RECORDS)
    return result


def _to_reserved(value: object) -> dict[int, int]:
    """Return ``reserved`` as ``{level: quota}``, highest level first, after checking it."""
    reserved = _levels_mapping("reserved", value, None)
    if not reserved:
        raise ConfigError(
            f"'reserved' must give a quota for at least one level (got {shown(value)})."
        )
    return {level: reserved[level] for level in sorted(reserved, reverse=True)}


# Settings are read-only properties, so no attribute needs a __setattr__ hook (a Python call
# on every state update of the per-poll methods).
@attrs.define(repr=False, eq=False, on_setattr=attrs.setters.NO_OP)
class CapacityBurst:
    """History windows per priority level and the capacity-burst rule over them.

    ``reserved`` maps every level ``0 .. N-1`` to its reserved quota. Call :meth:`quotas` before
    each poll and :meth:`record` with what the poll returned. Not thread-safe: the polling
    thread owns it.
    """

    _reserved: dict[int, int] = attrs.field(alias="reserved", converter=_to_reserved)
    _window_size: int = attrs.field(alias="window_size", default=6)
    _maxout_threshold: int = attrs.field(alias="maxout_threshold", default=4)
    # Plain lists, kept up to date incrementally, not numpy: both consumers call quotas() and
    # record() once per poll, and numpy's per-call overhead on a few levels x 6 slots cost
    # 21 us per poll (a tenth of the confluent consumer's CPU at 500 records per poll); now 6 us.
    # Index = level; each window is a ring of the last window_size counts, oldest at _next.
    _highest_first: range = attrs.field(init=False)
    _quota: list[int] = attrs.field(init=False)
    _windows: list[list[int]] = attrs.field(init=False)
    _maxed: list[int] = attrs.field(init=False)  # maxed-out slots per window
    _next: int = attrs.field(init=False, default=0)
    _bursts: list[int] = attrs.field(init=False)
    # The rule's outcome for the current windows, found once per record().
    _next_quotas: dict[int, int] = attrs.field(init=False)
    _next_bursting: int | None = attrs.field(init=False, default=None)
    _bursting_level: int | None = attrs.field(init=False, default=None)

    @_window_size.validator
    def _check_window_size(self, attribute: attrs.Attribute[int], value: int) -> None:
        check_int("window_size", value, minimum=1, maximum=MAX_WINDOW)

    @_maxout_threshold.validator
    def _check_maxout_threshold(self, attribute: attrs.Attribute[int], value: int) -> None:
        check_int("maxout_threshold", value, minimum=1)
        if value > self._window_size:
            raise ConfigError(
                f"'maxout_threshold' must be at most 'window_size' {self._window_size} "
                f"(got {shown(value)})."
            )

    def __attrs_post_init__(self) -> None:
        levels = range(self.max_priority)
        self._highest_first = levels[::-1]
        self._quota = [self._reserved[level] for level in levels]
        self._windows = [[0] * self._window_size for _ in levels]
        # A zero count maxes out only a level reserved 0 records.
        self._maxed = [self._window_size if quota == 0 else 0 for quota in self._quota]
        self._bursts = [0] * self.max_priority
        self._apply_rule()

    @property
    def max_priority(self) -> int:
        """The number of priority levels."""
        return len(self._reserved)

    @property
    def window_size(self) -> int:
        """How many polls each level's window remembers."""
        return self._window_size

    @property
    def maxout_threshold(self) -> int:
        """How many maxed-out polls in its window make a level eligible to burst."""
        return self._maxout_threshold

    @property
    def reserved(self) -> dict[int, int]:
        """The reserved quota of each level, highest level first (a copy)."""
        return dict(self._reserved)

    @property
    def bursting_level(self) -> int | None:
        """The level the last :meth:`quotas` call let burst, or None if none did (or no call)."""
        return self._bursting_level

    @property
    def windows(self) -> dict[int, tuple[int, ...]]:
        """Each level's window of recorded counts, oldest first, highest level first."""
        cut = self._next
        return {
            level: tuple(self._windows[level][cut:] + self._windows[level][:cut])
            for level in self._highest_first
        }

    @property
    def burst_counts(self) -> dict[int, int]:
        """How many :meth:`quotas` calls let each level burst, highest level first."""
        return {level: self._bursts[level] for level in self._highest_first}

    def history(self) -> tuple[tuple[tuple[int, ...], ...], int, tuple[int, ...]]:
        """An immutable copy of the windows (by level, each a ring whose oldest slot is the
        second item) and of the burst counts (by level): cheap enough to take every poll;
        :attr:`windows` and :attr:`burst_counts` are the readable forms."""
        return tuple(map(tuple, self._windows)), self._next, tuple(self._bursts)

    def quotas(self) -> dict[int, int]:
        """Return the record limit of each level for the next poll, highest level first.

        Every level gets at least its reserved quota; at most one level gets more, and its
        extra equals the other levels' unused capacity (see the module docstring).
        """
        self._bursting_level = bursting = self._next_bursting
        if bursting is not None:
            self._bursts[bursting] += 1
        return dict(self._next_quotas)

    def record(self, counts: Mapping[int, int]) -> None:
        """Append the count each level's poll returned to its window (a missing level counts 0).

        The oldest count of every window is dropped. Raises ConfigError for an unknown level or
        a count that is not a non-negative int, and then records nothing.
        """
        column = self._column(counts)
        slot = self._next
        maxed = self._maxed
        for level, quota in enumerate(self._quota):
            window = self._windows[level]
            count = column[level]
            maxed[level] += (count >= quota) - (window[slot] >= quota)
            window[slot] = count
        self._next = (slot + 1) % self._window_size
        self._apply_rule()

    def _column(self, counts: Mapping[int, int]) -> list[int]:
        """``counts`` as a list indexed by level, checked; the common case without a call."""
        column = [0] * self.max_priority
        try:
            for level, count in counts.items():
                if (
                    level.__class__ is not int or level < 0
                    or count.__class__ is not int or not 0 <= count <= MAX_RECORDS
                ):
                    raise TypeError
                column[level] = count
        except (AttributeError, TypeError, IndexError):
            # The full check names what is wrong, or accepts what the fast path does not know
            # (an int subclass, a Mapping without a fast items()).
            column = [0] * self.max_priority
            for level, count in _levels_mapping("counts", counts, self.max_priority).items():
                column[level] = count
        return column

    def _apply_rule(self) -> None:
        """Find the next poll's quotas from the windows (the rule in the module docstring)."""
        quota = self._quota
        unused = [
            reserved - top if (top := max(window)) < reserved else 0
            for reserved, window in zip(quota, self._windows, strict=True)
        ]
        quotas = {level: quota[level] for level in self._highest_first}
        bursting = None
        for level in self._highest_first:
            if self._maxed[level] >= self._maxout_threshold:
                burst = sum(unused) - unused[level]
                if burst > 0:
                    quotas[level] += burst
                    bursting = level
                break
        self._next_quotas = quotas
        self._next_bursting = bursting

    def __repr__(self) -> str:
        return (
            f"CapacityBurst(reserved={self._reserved!r}, window_size={self.window_size!r}, "
            f"maxout_threshold={self.maxout_threshold!r})"
        )


def allocate(
    quotas: Mapping[int, int],
    available: Mapping[int, int],
    total: int,
    bursting: int | None = None,
) -> dict[int, int]:
    """How many records each level gets out of ``total``: ``min(quota, available)``, trimmed.

    ``quotas`` is :meth:`CapacityBurst.quotas` (highest level first), ``available`` what each
    level has waiting (a missing level has nothing), ``bursting`` the level that borrowed.
    When the sum exceeds ``total``, the excess comes out of the bursting level first (a lender
    that has records again takes its share back at once), then out of the lowest levels up.
    So the result never sums to more than ``total``, and when the reserved quotas fit in
    ``total`` every level gets at least ``min(reserved, available)``. Deterministic and pure;
    the result is keyed like ``quotas``.
    """
    admitted = {
        level: max(0, min(quota, available.get(level, 0))) for level, quota in quotas.items()
    }
    excess = sum(admitted.values()) - max(0, total)
    if excess <= 0:
        return admitted
    order = sorted(admitted)  # lowest level first
    if bursting is not None and bursting in admitted:
        order.remove(bursting)
        order.insert(0, bursting)
    for level in order:
        cut = min(excess, admitted[level])
        admitted[level] -= cut
        excess -= cut
        if not excess:
            break
    return admitted


class Round(Generic[T]):
    """:func:`allocate` in streaming form: rounds of at most ``total`` records, served in pieces.

    ``total`` must be at least the sum of ``burst``'s reserved quotas. ``ask(position, want,
    taken)`` returns up to ``want`` records of level ``levels[position]`` (fewer: it ran dry), or
    None to stop the take at once (after a failure, keeping the records ``taken`` so far: they
    are returned and counted). ``ended(counts)``, if given, is called as each round ends, with
    what each level returned in it (:attr:`quotas` still the round's).

    A round starts with :meth:`CapacityBurst.quotas`: each level may return its reserved quota
    (its *credit*) and the bursting level its burst on top (its *extra*). Each :meth:`take`
    serves the next piece of the round: every level its credit, highest first, then the
    bursting level its extra out of what is left of the budget, so a lender that has records
    again gets its share back at once. A round ends when it has served ``total`` records, or
    after a take in which no level was cut short by the budget (each spent its credit or ran
    dry); its per-level counts then go to :meth:`CapacityBurst.record` and the next round starts.

    So on levels whose records do not change during a round, the round serves each level
    exactly ``allocate(quotas, available, total, bursting)``, however the budgets cut it
    (tests/test_burst.py checks this on random rounds). Pure and not thread-safe; the levels
    are addressed by position, highest level first (``levels``).
    """

    # The confluent PriorityConsumer calls take() once per consume() and poll(): one slotted
    # share per level read in a plain loop, comparisons instead of min() (a call each); the
    # loop costs about as much as the credits this replaced kept on its own level objects.
    __slots__ = ("_ask", "_burst", "_ended", "_left", "_shares", "_total", "levels", "quotas")

    def __init__(
        self,
        burst: CapacityBurst,
        total: int,
        ask: Callable[[int, int, list[T]], list[T] | None],
        ended: Callable[[dict[int, int]], None] | None = None,
    ) -> None:
        self._burst = burst
        self._ask = ask
        self._ended = ended
        #: The current round's quotas (:meth:`CapacityBurst.quotas`), highest level first.
        self.quotas: dict[int, int] = {}
        reserved = burst.reserved
        # allocate() takes a total below the reserved sum out of the borrower's reserved share
        # first; a stream serving reserved shares highest first cannot, so it needs them to fit
        # (the confluent consumer's split of max.poll.records sums to it exactly).
        self._total = check_int(
            "total", total, minimum=max(1, sum(reserved.values())), maximum=MAX_RECORDS
        )
        #: The levels, highest first: position ``i`` of every method is ``levels[i]``.
        self.levels: tuple[int, ...] = tuple(reserved)
        self._shares = [
            _Share(i, level, reserved[level]) for i, level in enumerate(self.levels)
        ]
        self._left = 0
        self._start()

    @property
    def counts(self) -> dict[int, int]:
        """What each level returned so far in the current round, highest level first."""
        return {share.level: share.count for share in self._shares}

    @property
    def left(self) -> int:
        """How many more records the current round may serve."""
        return self._left

    def take(self, budget: int) -> list[T]:
        """The next piece of the round: at most ``budget`` records, highest level first."""
        if budget > self._left:
            budget = self._left
        ask = self._ask
        taken: list[T] = []
        over = True
        bursting = None
        at = 0
        for share in self._shares:
            want = share.credit if share.credit < budget else budget
            if want > 0:
                batch = ask(share.position, want, taken)
                if batch is None:
                    return self._stopped(taken)
                got = len(batch)
                if got:
                    share.credit -= got
                    share.count += got
                    budget -= got
                    taken += batch
                if got < want:
                    continue  # ran dry: done for this round
            if share.extra:
                bursting, at = share, len(taken)
            elif share.credit > 0:
                over = False  # the budget stopped it, not its records
        if bursting is not None:
            want = bursting.extra if bursting.extra < budget else budget
            batch = ask(bursting.position, want, taken) if want > 0 else []
            if batch is None:
                return self._stopped(taken)
            got = len(batch)
            if got:
                bursting.extra -= got
                bursting.count += got
                taken[at:at] = batch
            if got == want and bursting.credit + bursting.extra > 0:
                over = False
        # Inline, not a helper: a call costs a tenth of a consume(1) through this method.
        self._left -= len(taken)
        if over or not self._left:
            self._next()
        return taken

    def first(self) -> int:
        """The position of the highest level the round still has room for (to wait on).

        A round always has one: it ends as soon as no level has any left.
        """
        return next(share.position for share in self._shares if share.credit + share.extra > 0)

    def with_room(self) -> list[int]:
        """The positions of every level the round still has room for, highest first (to wait
        on all at once); never empty, as :meth:`first`."""
        return [share.position for share in self._shares if share.credit + share.extra > 0]

    def took(self, position: int, got: int) -> None:
        """Count ``got`` records returned by the level at ``position`` outside :meth:`take`
        (at most what it has room for): its credit first, then its extra."""
        share = self._shares[position]
        spent = got if got < share.credit else share.credit
        share.credit -= spent
        share.extra -= got - spent
        share.count += got
        self._left -= got
        if not self._left:
            self._next()

    def _stopped(self, taken: list[T]) -> list[T]:
        """End a take that ``ask`` stopped: ``taken`` count, the round goes on unless full."""
        self._left -= len(taken)
        if not self._left:
            self._next()
        return taken

    def _next(self) -> None:
        """End the round: its counts go to the burst windows; start the next one."""
        counts = {share.level: share.count for share in self._shares}
        self._burst.record(counts)
        if self._ended is not None:
            self._ended(counts)
        self._start()

    def _start(self) -> None:
        # A round serves at most total: what a burst cannot fit is not carried on.
        self._left = self._total
        self.quotas = quotas = self._burst.quotas()
        for share in self._shares:
            share.credit = share.reserved
            share.extra = quotas[share.level] - share.reserved
            share.count = 0

    def __repr__(self) -> str:
        credit = {share.level: share.credit for share in self._shares}
        extra = {share.level: share.extra for share in self._shares}
        return f"Round(credit={credit}, extra={extra}, left={self._left})"


class _Share:
    """One level's share of the current round (position = its index in ``Round.levels``)."""

    __slots__ = ("count", "credit", "extra", "level", "position", "reserved")

    def __init__(self, position: int, level: int, reserved: int) -> None:
        self.position = position
        self.level = level
        self.reserved = reserved
        self.credit = 0  # of its reserved quota, what it may still return in this round
        self.extra = 0  # and of its burst, when it bursts
        self.count = 0  # what it returned in this round
