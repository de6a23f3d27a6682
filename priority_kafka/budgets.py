"""Downstream rate budgets split by priority (pure: no I/O, no threads, no clock of its own).

A :class:`Budget` is a rate, in cost units per second, for one *resource* (what a handler
calls: an SMS gateway, a payment API). :class:`TokenBudget` spends it, given the time by its
caller, by this rule:

- **Tokens.** A token bucket: tokens accrue at ``rate`` per second up to ``burst`` (1: evenly
  spaced), and a record takes ``cost`` of them once at least one is there (overdrawing by up to
  ``cost - 1``, which the next tokens pay back). A caller coming back late to records that
  waited with credit owes them the tokens of the late span: the bucket then holds up to
  ``catch_up_s`` of the rate more, so a wake-up up to ``catch_up_s`` late loses no token. And
  no ``window_s`` (1 s) holds more than ``rate * window_s + burst`` tokens, what a bucket
  alone allows, each counted from its call's start (:meth:`TokenBudget.started`; until then
  from its grant). So in any span of ``W`` seconds at most ``rate * W + burst + rate *
  catch_up_s`` tokens are granted, and the calls started in any ``window_s`` take at most
  ``rate * window_s + burst`` (plus ``cost - 1`` for a record of cost ``cost``).
- **Periods.** The split works on periods of ``N`` tokens, ``N = max(m, round(rate *
  period_s))`` where ``m`` is the smallest count the consumer's distributor splits over every
  level; a period lasts ``N / rate`` seconds, not counting the time its tokens could not be
  released: a throttle's pause, a span in which the window was full, and a late caller's span
  past ``catch_up_s`` in which the bucket, full, lost the tokens a waiting level had credit for
  (and a late caller gets each ended period's last tokens for that period's credits). So a
  period always releases its ``N`` tokens, and under saturation each level gets its reserved
  part of the tokens actually spent, however late the caller wakes or often the downstream
  throttles (the lowest level does not bear the loss alone).
- **Split by priority.** Each level's *reserved* tokens per period are the consumer's reserved
  shares applied to ``N`` with the same proportional rule as the poll quotas
  (:class:`~priority_kafka.distributors.WeightedDistributor`), and the unused share of idle
  levels is lent by the same history-window rule (:class:`~priority_kafka.burst.CapacityBurst`:
  a period is a poll, a level's spent tokens its count). A released token goes to the highest
  waiting level with reserved tokens left, then to the level the rule lets borrow. So an urgent
  record takes the next token, and under saturation every level gets its reserved share.
- **Across the group.** :meth:`TokenBudget.set_shares` scales each level's reserved tokens by
  the part of that level's partitions this process is assigned (``assigned / total``), so the
  processes of one group together spend the budget without talking to each other; the
  history windows carry over a rebalance, scaled to the new tokens.
- **Adaptive (AIMD).** :meth:`TokenBudget.throttle` (the downstream said "too many") pauses the
  resource for ``retry_after`` seconds (default: one period) and multiplies the rate by
  ``decrease`` (once per period, however many calls were throttled together), keeping the
  period's credits (the rest of its tokens come after the pause, at the new rate); every
  ``period_s`` after the pause in which calls succeeded adds ``increase * rate`` back, up to
  the configured rate: after one throttle the full rate is back ``(1 - decrease) / increase *
  period_s`` (2.5 s) after the pause, whatever the rate or the caller's lateness. Each
  decrease also multiplies what a late caller catches up on by ``decrease``: a downstream
  that refuses calls may refuse bunches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from priority_kafka._budget_window import SpendWindow
from priority_kafka._checks import check_int, check_number, shown
from priority_kafka.burst import CapacityBurst
from priority_kafka.distributors import WeightedDistributor, distribute
from priority_kafka.errors import ConfigError

__all__ = [
    "DEFAULT_RESOURCE",
    "Budget",
    "Budgets",
    "LevelSpend",
    "Throttled",
    "TokenBudget",
    "parse_budget",
]

#: The resource of every record when :class:`Budgets` has no ``resource`` function.
DEFAULT_RESOURCE = "default"
# A float time compared with a release time computed from it may be off by rounding.
_EPSILON = 1e-9


class Throttled(Exception):
    """Raised (or returned) by a handler when the downstream refused a call for its rate.

    The executor pauses the record's resource for ``retry_after`` seconds (None: one budget
    period), lowers its budget, and calls the handler again once a token is free; this spends
    no attempt of the retry policy.
    """

    def __init__(self, retry_after: float | None = None, message: str = "") -> None:
        if retry_after is not None:
            retry_after = check_number("retry_after", retry_after, minimum=0.0)
        self.retry_after = retry_after
        super().__init__(message or f"throttled (retry_after={retry_after!r})")


def _rate(value: object) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ConfigError(f"'rate' must be a positive number (got {shown(value)}).") from None
    rate = check_number("rate", value, minimum=0.0)
    if rate <= 0:
        raise ConfigError(f"'rate' must be a positive number (got {shown(value)}).")
    return rate


def _positive(name: str) -> Callable[[Any, attrs.Attribute[Any], float], None]:
    def validate(instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
        if check_number(name, value, minimum=0.0) <= 0:
            raise ConfigError(f"{name!r} must be a positive number (got {shown(value)}).")

    return validate


def _fraction(name: str) -> Callable[[Any, attrs.Attribute[Any], float], None]:
    def validate(instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
        if not 0 < check_number(name, value, minimum=0.0) <= 1:
            raise ConfigError(f"{name!r} must be in (0, 1] (got {shown(value)}).")

    return validate


@attrs.frozen
class Budget:
    """One resource's budget: ``rate`` cost units per second (a number, or its text).

    ``burst``: the most tokens the bucket holds (1: evenly spaced; default 20 ms of the rate,
    at least 1, so a wake-up a few milliseconds late loses no token);
    ``period_s``: about how long a period lasts (the split and the lending are per period), and
    the step of the additive increase;
    ``decrease``: the rate's factor on a throttle; ``increase``: the part of ``rate`` added
    back every ``period_s`` with successes; ``min_rate_fraction``: the lowest the rate goes;
    ``catch_up_s``: how late a caller may come back to records that waited with credit and
    still lose no token (the bucket then holds ``burst`` plus this long of the rate; 0: a late
    caller loses what overflows ``burst``);
    ``window_s``: the calls started in any span of this length take at most ``rate *
    window_s + burst`` tokens (plus ``cost - 1``), however late the caller came back.
    """

    rate: float = attrs.field(converter=_rate)
    burst: int = attrs.field(
        default=attrs.Factory(lambda self: max(1, math.ceil(self.rate * 0.02)), takes_self=True)
    )
    period_s: float = attrs.field(default=0.5, validator=_positive("period_s"))
    decrease: float = attrs.field(default=0.5, validator=_fraction("decrease"))
    increase: float = attrs.field(default=0.1, validator=_fraction("increase"))
    min_rate_fraction: float = attrs.field(default=0.05, validator=_fraction("min_rate_fraction"))
    catch_up_s: float = attrs.field(default=0.25)
    window_s: float = attrs.field(default=1.0, validator=_positive("window_s"))

    @burst.validator
    def _check_burst(self, attribute: attrs.Attribute[int], value: int) -> None:
        check_int("burst", value, minimum=1)

    @catch_up_s.validator
    def _check_catch_up(self, attribute: attrs.Attribute[float], value: float) -> None:
        check_number("catch_up_s", value, minimum=0.0)


def _budget(value: object) -> Budget:
    return value if isinstance(value, Budget) else Budget(value)


def _resources(value: object) -> dict[str, Budget]:
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(
            f"'resources' must be a non-empty mapping of resource name to rate or Budget "
            f"(got {shown(value)})."
        )
    result: dict[str, Budget] = {}
    for name, budget in value.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"resource names must be non-empty strings (got {shown(name)}).")
        try:
            result[name] = _budget(budget)
        except ConfigError as exc:
            raise ConfigError(f"budget of resource {name!r}: {exc}") from None
    return result


def _optional_callable(name: str) -> Callable[[Any, attrs.Attribute[Any], object], None]:
    def validate(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and not callable(value):
            raise ConfigError(f"{name!r} must be a callable of the record (got {shown(value)}).")

    return validate


@attrs.frozen
class Budgets:
    """The budgets of an executor: ``resources`` maps a name to a rate or a :class:`Budget`.

    ``resource(record)`` names the resource a record calls (a header, a key prefix); without
    it every record calls the one resource, so ``resources`` must then have exactly one.
    ``cost(record)`` is how many tokens a record takes (default 1), a positive int.
    """

    resources: dict[str, Budget] = attrs.field(converter=_resources)
    resource: Callable[[Any], str] | None = attrs.field(
        default=None, validator=_optional_callable("resource")
    )
    cost: Callable[[Any], int] | None = attrs.field(
        default=None, validator=_optional_callable("cost")
    )

    def __attrs_post_init__(self) -> None:
        if self.resource is None and len(self.resources) != 1:
            raise ConfigError(
                f"'resource' (a function of the record) is needed with several resources "
                f"(got {sorted(self.resources)})."
            )

    def resource_of(self, record: Any) -> str:
        """The resource ``record`` calls; ConfigError if it has no budget."""
        if self.resource is None:
            return next(iter(self.resources))
        name = self.resource(record)
        if name not in self.resources:
            raise ConfigError(
                f"'resource' returned {shown(name)} for the record at offset "
                f"{getattr(record, 'offset', '?')}, which has no budget "
                f"(known: {sorted(self.resources)})."
            )
        return name

    def cost_of(self, record: Any) -> int:
        """The tokens ``record`` takes; ConfigError if the cost function gives no positive int."""
        if self.cost is None:
            return 1
        return check_int("cost", self.cost(record), minimum=1)


def parse_budget(text: str) -> tuple[str, Budget]:
    """``NAME=RATE`` (the CLI's ``--budget``) as a resource name and its :class:`Budget`."""
    name, sep, rate = text.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"'--budget' must be NAME=RATE, like sms=200 (got {shown(text)}).")
    try:
        return name.strip(), Budget(rate)
    except ConfigError as exc:
        raise ConfigError(f"'--budget' {text!r}: {exc}") from None


@attrs.frozen
class LevelSpend:
    """What one level of one resource spent so far: tokens and records granted."""

    tokens: int
    records: int


class TokenBudget:
    """The rule of the module docstring for one resource. Not thread-safe; its owner passes
    the time (seconds, any monotonic origin) to every call, so it is exact under test.

    ``weights``: each level's reserved share (any positive scale), e.g. the consumer's
    ``levels.reserved``; ``window_size`` and ``maxout_threshold`` as for the poll quotas.
    """

    def __init__(
        self,
        budget: Budget,
        weights: Mapping[int, int | float],
        now: float,
        *,
        window_size: int = 6,
        maxout_threshold: int = 4,
    ) -> None:
        self.budget = budget
        levels = len(weights)
        if sorted(weights) != list(range(levels)):
            raise ConfigError(f"'weights' must cover levels 0..N-1 (got {shown(dict(weights))}).")
        distributor = WeightedDistributor([weights[level] for level in range(levels)])
        tokens = max(distributor.minimum_records(levels), round(budget.rate * budget.period_s))
        #: Tokens per period for the whole group, and each level's reserved part of them.
        self.tokens = tokens
        self.reserved = distribute(distributor, levels, tokens)
        self._window = (window_size, maxout_threshold)
        self._rate = budget.rate
        self._throttled_at = -math.inf
        self._successes = 0
        self.throttles = 0
        self._spent = {level: [0, 0] for level in self.reserved}
        self._local = dict(self.reserved)
        self._paused_until = -math.inf
        #: When the current period ends (set by _open, pushed back by pauses and lost spans).
        self._end: float = now
        #: Levels the last grant left waiting with credit: their wait is the caller's to end.
        self._owed: set[int] = set()
        # The bucket: tokens at time _filled (never more than _cap(); below 0 when overdrawn).
        self._tokens = float(budget.burst)
        self._filled = now
        # What the last window_s spent, each call's tokens from its start (until then its grant).
        self._spends = SpendWindow(budget.window_s)
        #: When the next additive increase is due (inf: at the configured rate).
        self._grow_at = math.inf
        self._catch_up = budget.catch_up_s  # lowered by each decrease
        self._new_rule()
        self._open(now)

    # -- state ------------------------------------------------------------------------------

    @property
    def rate(self) -> float:
        """The rate now (AIMD-adjusted), for the whole group."""
        return self._rate

    @property
    def local_rate(self) -> float:
        """The rate this process spends now: its share of :attr:`rate`."""
        return self._rate * sum(self._local.values()) / self.tokens

    @property
    def period(self) -> float:
        """The length of a period at the current rate."""
        return self.tokens / self._rate

    @property
    def paused_until(self) -> float:
        """When a throttle's pause ends (in the past when none is on)."""
        return self._paused_until

    @property
    def borrowing(self) -> int | None:
        """The level the history-window rule lets borrow in the current period, if any."""
        return self._burst.bursting_level

    def settle(self, now: float) -> None:
        """Take the additive-increase steps due by ``now`` within the current period (as
        :meth:`grant` and :meth:`wake_at` would), so :attr:`rate` read now is the rate now
        even while nobody asks for tokens; periods close only in those two."""
        while self._grow_at <= now and self._grow_at < self._end - _EPSILON:
            self._step_up(now)

    def spent(self) -> dict[int, LevelSpend]:
        """Tokens and records each level was granted so far, highest level first."""
        return {level: LevelSpend(*pair) for level, pair in self._spent.items()}

    # -- the rule ---------------------------------------------------------------------------

    def set_shares(self, shares: Mapping[int, float], now: float) -> None:
        """Take ``shares[level]`` (0..1: this process's part of the level's partitions; a
        missing level 0) of each level's reserved tokens, rounded so that they sum to the
        nearest int of the exact total (largest remainders); the history windows carry over,
        scaled to the new tokens."""
        exact = {}
        for level, reserved in self.reserved.items():
            share = check_number(f"shares[{level}]", shares.get(level, 0.0), minimum=0.0,
                                 maximum=1.0)
            exact[level] = reserved * share
        local = {level: math.floor(value) for level, value in exact.items()}
        short = round(sum(exact.values())) - sum(local.values())
        for level in sorted(exact, key=lambda lv: (local[lv] - exact[lv], -lv))[:short]:
            local[level] += 1
        if local == self._local:
            return  # a rebalance that moved none of this process's share: keep the windows
        previous, history = self._local, self._burst.windows
        self._local = local
        self._new_rule()
        # The windows carry over, each count scaled to the level's new tokens (a level this
        # process held none of counts as idle), so a busy level borrows on at once.
        for slot in range(self._window[0]):
            self._burst.record({
                level: round(counts[slot] * local[level] / previous[level])
                if previous[level] else 0
                for level, counts in history.items()
            })
        self._open(max(now, self._paused_until))

    def grant(self, waiting: Mapping[int, Sequence[int]], now: float) -> dict[int, int]:
        """How many of each level's waiting records (their costs, in the order they are to
        go) may go now; their tokens are spent. Levels with none granted are left out."""
        granted: dict[int, int] = {}
        self._spends.forget(now)
        if any(waiting.get(level) for level in self._owed):
            # Records waited with credit since the last call: the bucket caught up on the
            # tokens of a late call (up to catch_up_s); past that, as if it had come on time,
            # the tokens lost are skipped, and each period's tokens go to its own credits.
            self._skip_lost(now)
            self._advance(now, lambda: self._grant(waiting, granted, now))
        else:
            self._owed = set()  # nobody waited with credit: the bucket holds burst
            self._advance(now)
        self._refill(now)
        if now < self._paused_until:
            return granted
        self._grant(waiting, granted, now)
        self._owed = {level for level, costs in waiting.items() if len(costs) > granted.get(
            level, 0) and (self._credit.get(level, 0) > 0 or self._extra.get(level, 0) > 0)}
        if self._owed:
            self._hold_for_window(now)
        return granted

    def _hold_for_window(self, now: float) -> None:
        """Levels wait with credit: if the window opens only after the bucket's next token
        (now, if it holds one), then from that token until the window opens neither the
        period's clock runs nor tokens accrue (they would pass the window), as in a pause; so
        the period still releases its tokens to its own credits. (Held only when the bucket
        already had a token, a window that filled with the bucket empty let the period run
        out with its lowest levels' credits unspent: level 0 got 13.2 % of 14 % with the
        gate stalling now and then, in the pure core.)"""
        opens = self._spends.opens(now, self._window_cap())
        since = max(now, self._filled)
        ready = since + max(0.0, 1 - self._tokens) / self.local_rate
        if opens > ready:
            self._refill(ready)
            self._end += opens - ready
            self._filled = opens

    def _grant(self, waiting: Mapping[int, Sequence[int]], granted: dict[int, int],
               now: float) -> None:
        room = self._window_cap() - 1 + _EPSILON  # the window's spend before a grant
        if self._tokens < 1 - _EPSILON or self._spends.total > room:
            return
        for extra in (False, True):
            for level in self._credit:
                costs = waiting.get(level, ())
                taken = granted.get(level, 0)
                while (taken < len(costs) and self._tokens >= 1 - _EPSILON
                       and self._spends.total <= room):
                    left = self._extra[level] if extra else self._credit[level]
                    if left <= 0:
                        break
                    cost = costs[taken]
                    if extra:
                        self._extra[level] -= cost
                    else:
                        self._credit[level] -= cost
                    self._tokens -= cost
                    self._spends.spend(now, cost)
                    self._counts[level] += cost
                    self._spent[level][0] += cost
                    self._spent[level][1] += 1
                    taken += 1
                if taken:
                    granted[level] = taken

    def wake_at(self, now: float) -> float:
        """When :meth:`grant` may next grant more: the next release, or the next period."""
        self._advance(now)
        end = self._end
        if now < self._paused_until:
            return self._paused_until
        if self._size == 0:
            return end
        self._refill(now)
        self._spends.forget(now)
        opens = self._spends.opens(now, self._window_cap())
        if self._tokens >= 1 - _EPSILON and opens <= now:
            return end  # tokens but no credit (or nobody waiting): the next period's credits
        ready = now + max(0.0, 1 - self._tokens) / self.local_rate
        return min(end, max(ready, opens))

    def throttle(self, now: float, retry_after: float | None = None) -> None:
        """The downstream refused a call: pause for ``retry_after`` (None: one period) and,
        once per period, lower the rate by ``decrease``. The current period keeps its credits:
        its tokens left are released after the pause, at the new rate."""
        self._advance(now)
        self.throttles += 1
        pause = self.period if retry_after is None else retry_after
        # The period's tokens still to release: those its clock has yet to accrue (from where
        # the clock stands, which a full window or a late caller's skipped span may have set
        # past now, and the last refill may have left behind it) and those the bucket holds.
        left = max(0.0, self._end - max(self._filled, self._paused_until)) * self.local_rate
        left += self._tokens
        if now >= self._throttled_at + self.period:
            floor = self.budget.rate * self.budget.min_rate_fraction
            self._rate = max(floor, self._rate * self.budget.decrease)
            self._throttled_at = now
            # A downstream that refuses calls may be one that refuses bunches (its own bucket
            # smaller than a catch-up): catch up less, for good.
            self._catch_up *= self.budget.decrease
        self._successes = 0
        resume = max(now + pause, self._paused_until)
        self._paused_until = resume
        if self._rate < self.budget.rate:
            self._grow_at = resume + self.budget.period_s
        # Nothing accrues during the pause; its end releases one token at once, and the rest
        # of the period's tokens at the new rate, the bucket's dropped ones among them (lost,
        # they were the lowest levels' credits: the period ended with those unspent).
        self._tokens = min(self._tokens, 0.0) + 1
        self._end = resume + (max(0.0, left - self._tokens) / self.local_rate
                              if self._size else 0.0)
        self._filled = resume

    def started(self, now: float, granted_at: float, cost: int = 1) -> None:
        """A call granted at ``granted_at`` (the time given to :meth:`grant`) starts now: the
        window counts its tokens from now, not from the grant. So the window bounds when the
        calls start, however long a granted record waited for a worker (a grant not started
        within ``window_s`` counts from its start only). ``cost``: its tokens."""
        self._spends.started(now, granted_at, cost)

    def dropped(self, granted_at: float, cost: int = 1) -> None:
        """A record granted at ``granted_at`` will not be called (its partition was revoked):
        the window no longer counts its tokens."""
        self._spends.unspend(granted_at, cost)

    def succeeded(self, calls: int = 1) -> None:
        """``calls`` calls to the resource succeeded (counts towards the additive increase)."""
        self._successes += calls

    # -- internals --------------------------------------------------------------------------

    def _new_rule(self) -> None:
        window_size, threshold = self._window
        self._burst = CapacityBurst(self._local, window_size, threshold)
        self._size = sum(self._local.values())

    def _open(self, start: float) -> None:
        """Start a period at ``start``: the rule's quotas become the levels' credits."""
        self._end = start + self.period
        quotas = self._burst.quotas()
        self._credit = {level: self._local[level] for level in quotas}
        self._extra = {level: quotas[level] - self._local[level] for level in quotas}
        self._counts = dict.fromkeys(quotas, 0)

    def _close(self) -> None:
        """End the current period: its counts go to the history windows."""
        self._burst.record(self._counts)

    def _skip_lost(self, now: float) -> None:
        """A level the last grant left waiting with credit still waits: if the caller came
        back so late that the full bucket lost tokens, that span counts neither for the bucket
        nor for the period (as a pause would not), so the period still releases its tokens."""
        if now <= self._filled:
            return
        rate = self.local_rate
        lost = (now - self._filled) - (self._cap() - self._tokens) / rate if rate else 0.0
        if lost > 0:
            self._filled += lost
            self._end += lost

    def _advance(self, now: float, serve: Callable[[], None] | None = None) -> None:
        """Close the periods that ended by ``now``; ``serve`` (records waited throughout)
        grants each period's last tokens to its own credits before it closes."""
        while True:
            self.settle(now)
            if now < self._end - _EPSILON:
                return
            end = self._end
            self._refill(end)  # at the old rate up to the period's end
            if serve is not None and end >= self._paused_until:
                serve()
            self._close()
            if now - end > self.period * self._window[0]:
                # Long idle: the windows hold only empty periods by now.
                for _ in range(self._window[0]):
                    self._burst.record({})
                end = now
            self._open(end)

    def _step_up(self, now: float) -> None:
        """The additive increase due at ``_grow_at``, if calls succeeded since the last step
        (a caller late past several steps counts the successes it saw for each of them: they
        came while it was away); the current period's tokens left come at the new rate."""
        at = self._grow_at
        if self._successes:
            self._refill(at)  # at the old rate up to the step
            before = self.local_rate
            self._rate = min(self.budget.rate,
                             self._rate + self.budget.increase * self.budget.rate)
            if before:  # a process holding none of the levels has no tokens to rescale
                # The tokens left come after the period's clock, which a pause, a full window
                # or a late caller's skipped span may have set past the step: rescaled from
                # the step itself, they shrank (a level-0 credit of 14 went unspent).
                pivot = max(at, self._filled)
                self._end = pivot + (self._end - pivot) * before / self.local_rate
        self._grow_at = at + self.budget.period_s if self._rate < self.budget.rate else math.inf
        if self._grow_at > now:
            self._successes = 0

    def _cap(self) -> float:
        """The bucket's size: ``burst``, plus ``catch_up_s`` of the rate while records the last
        grant left waiting with credit still wait (a late caller owes them those tokens)."""
        return self.budget.burst + (self._catch_up * self.local_rate if self._owed else 0.0)

    def _refill(self, now: float) -> None:
        """Add the tokens accrued since the last refill (none before a pause ends)."""
        if now > self._filled:
            rate = self.local_rate
            self._tokens = min(self._cap(), self._tokens + (now - self._filled) * rate)
            self._filled = now

    def _window_cap(self) -> float:
        """The most tokens any ``window_s`` may hold: this process's share of the configured
        rate (not the AIMD-lowered one: the window bounds, AIMD paces) plus ``burst``, what a
        bucket alone allows, so catching up adds nothing over a window; the processes of a
        group together ``rate * window_s + burst`` (at least 1 token each)."""
        share = self._size / self.tokens
        return max(1.0, share * (self.budget.rate * self.budget.window_s + self.budget.burst))

    def __repr__(self) -> str:
        return (
            f"TokenBudget(rate={self._rate:g}, tokens={self.tokens}, "
            f"reserved={self.reserved!r}, local={self._local!r})"
        )
