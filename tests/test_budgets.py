"""The pure budget core: token release, the split by priority, lending, AIMD, group shares."""

from __future__ import annotations

import heapq
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from priority_kafka.budgets import (
    Budget,
    Budgets,
    Throttled,
    TokenBudget,
    parse_budget,
)
from priority_kafka.errors import ConfigError

WEIGHTS = {2: 4, 1: 2, 0: 1}  # the consumer's exponential reserved shares
SATURATED = {level: [1] * 50 for level in WEIGHTS}


def run(budget: TokenBudget, demand: dict[int, int], start: float, seconds: float,
        step: float) -> tuple[dict[int, int], list[tuple[float, int]]]:
    """Offer ``demand`` one-token records per level (refilled each step) for ``seconds``;
    return what each level got and the (time, tokens) of every grant."""
    got = dict.fromkeys(demand, 0)
    grants: list[tuple[float, int]] = []
    steps = round(seconds / step)
    for i in range(steps):
        now = start + i * step
        granted = budget.grant({lv: [1] * n for lv, n in demand.items()}, now)
        for level, n in granted.items():
            got[level] += n
            grants.append((now, n))
    return got, grants


def test_split_and_exact_rate_under_saturation() -> None:
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    assert budget.tokens == 100
    assert budget.reserved == {2: 58, 1: 28, 0: 14}
    got, _ = run(budget, {2: 50, 1: 50, 0: 50}, 0.0, 10.0, 0.001)
    assert sum(got.values()) == 2000  # exactly rate * seconds
    # Every level gets exactly its reserved share: no starvation of level 0.
    assert got == {2: 1160, 1: 560, 0: 280}


def test_urgent_record_takes_the_next_token() -> None:
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    run(budget, {0: 50}, 0.0, 3.0, 0.001)  # level 0 floods and borrows
    # A level-2 record arriving now waits at most one token interval.
    now = 3.0
    while not budget.grant({2: [1], 0: [1] * 50}, now).get(2):
        now += 0.0005
    assert now - 3.0 <= 1 / 200 + 1e-9


def test_idle_share_is_lent_by_the_history_window_rule() -> None:
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    got, _ = run(budget, {0: 50}, 0.0, 2.0, 0.001)
    # Two periods at the reserved 14 (before level 0 is eligible to burst), ... full after.
    first, _ = run(budget, {0: 50}, 2.0, 1.0, 0.001)
    assert got[0] < 200
    assert first[0] == 200  # the whole rate once the window shows the others idle
    # The lenders take their share back at once when busy again.
    back, _ = run(budget, {2: 50, 0: 50}, 3.0, 1.0, 0.001)
    assert back[2] >= 116


def most_in_any(times: list[float], window: float) -> int:
    """The most of ``times`` (sorted) in any span ``(t - window, t]``."""
    most, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window + 1e-9:  # as the core: a float time at the edge is out
            j += 1
        most = max(most, i - j + 1)
    return most


@settings(max_examples=60, deadline=None)
@given(
    rate=st.integers(min_value=7, max_value=500),
    burst=st.integers(min_value=1, max_value=5),
    catch_up=st.sampled_from([0.0, 0.05, 0.25]),
    demand=st.dictionaries(st.integers(0, 2), st.integers(0, 20), min_size=1),
    step=st.sampled_from([0.0007, 0.003, 0.02, 0.09]),
    window=st.sampled_from([0.1, 0.37, 1.0, 2.5]),
)
def test_never_more_than_the_window_nor_the_bucket_allows(
    rate: int, burst: int, catch_up: float, demand: dict[int, int], step: float, window: float
) -> None:
    """Any span W spends at most rate x W + burst + rate x catch_up_s (the bucket, full, and
    what a late caller caught up on), and any window_s (1 s) at most rate x window_s + burst,
    as a bucket alone: a caller late by up to 90 ms catches up, no 1 s window the more."""
    budget = TokenBudget(Budget(rate, burst=burst, period_s=0.25, catch_up_s=catch_up),
                         WEIGHTS, 0.0)
    _, grants = run(budget, demand, 0.0, 4.0, step)
    times = [t for t, n in grants for _ in range(n)]
    assert most_in_any(times, window) <= rate * window + burst + rate * catch_up + 1e-9
    assert most_in_any(times, 1.0) <= rate + burst


@settings(max_examples=40, deadline=None)
@given(rate=st.integers(min_value=20, max_value=400), a=st.integers(1, 4), b=st.integers(1, 4),
       c=st.integers(1, 4))
def test_shares_under_saturation_match_reserved(rate: int, a: int, b: int, c: int) -> None:
    weights = {2: c, 1: b, 0: a}
    budget = TokenBudget(Budget(rate), weights, 0.0)
    got, _ = run(budget, {2: 10, 1: 10, 0: 10}, 0.0, 20 * budget.period, 0.0005)
    total = sum(got.values())
    for level, reserved in budget.reserved.items():
        assert abs(got[level] / total - reserved / budget.tokens) <= 0.02


def test_throttle_pauses_decreases_once_and_recovers() -> None:
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    budget.throttle(1.0, retry_after=2.0)
    budget.throttle(1.001, retry_after=2.0)  # the same burst of 429s: one decrease
    assert budget.rate == 100
    assert budget.grant({2: [1]}, 2.99) == {}
    assert budget.wake_at(2.5) == pytest.approx(3.001)
    assert budget.grant({2: [1]}, 3.01) == {2: 1}
    now = 3.01
    while budget.rate < 200:
        budget.succeeded()
        now += 0.01
        budget.grant({2: [1]}, now)
    # Additive increase of 10 % of the rate every period_s (0.5 s) with successes after the
    # pause (it ended at 3.001): (1 - 0.5) / 0.1 = 5 steps, 2.5 s.
    assert now - 3.001 == pytest.approx(2.5, abs=0.011)


@pytest.mark.parametrize("step", [0.001, 0.07, 0.25, 1.2])
def test_recovery_takes_five_steps_of_period_s_however_late_the_caller(step: float) -> None:
    """The additive increase is a step every period_s after the pause, not one per period of
    N tokens (which lasted N / rate: 1 s at the halved rate, 3.7 s for the climb, and longer
    with every span a late caller lost: 4.3 and 5.4 s were measured under load). A step
    without successes adds nothing."""
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    run(budget, {2: 50, 1: 50, 0: 50}, 0.0, 2.0, step)
    budget.throttle(2.0, retry_after=1.0)
    assert budget.rate == 100
    rates: list[tuple[float, float]] = []
    now = 2.0
    while budget.rate < 200:
        now += step
        granted = budget.grant(SATURATED, now)
        if now >= 3.7:  # no call succeeds before: the step at 3.5 s adds nothing
            budget.succeeded(sum(granted.values()))
        rates.append((now, budget.rate))
    assert all(rate == 100 for t, rate in rates if t < 4.0)
    # Steps at 4.0, 4.5, 5.0, 5.5 and 6.0 s: seen by the first call at or after each (a
    # call 1.2 s late takes the steps it missed with the successes it saw).
    assert 6.0 <= rates[-1][0] <= 6.0 + step + 1e-9
    if step < 0.5:
        assert [rate for _, rate in rates if rate > 100][:1] == [120]


def _shares_off_reserved(budget: TokenBudget, got: dict[int, int]) -> dict[int, float]:
    total = sum(got.values())
    return {level: got[level] / total - reserved / budget.tokens
            for level, reserved in budget.reserved.items()}


@pytest.mark.parametrize(("step", "spent"), [(0.03, 0.99), (0.07, 0.95), (0.25, 0.95)])
def test_a_late_caller_loses_no_tokens_nor_starves_the_lowest_level(
    step: float, spent: float
) -> None:
    """Under load the gate's thread wakes late: each call comes ``step`` after the last, when
    the bucket (4 tokens at 200/s) would have released more. The bucket lost what overflowed
    it: 4 tokens a call, 67 % of the rate at 30 ms and 29 % at 70 ms (the budget side of the
    benchmark spent 36 to 65 % of the rate under load). Now records that waited with credit
    are owed the tokens of the late span (catch_up_s, 250 ms), within the 1 s window's rate +
    burst: the rate is spent but for what the window holds back of a late call's catch-up
    (a 1 s window holds 15 calls of 70 ms: 1.05 s of tokens). Each level's share stays its
    reserved one (level 0 got 0 % before the periods skipped lost spans)."""
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    got, grants = run(budget, {2: 50, 1: 50, 0: 50}, 0.0, 30.0, step)
    assert spent * 200 * 30 <= sum(got.values()) <= 200 * 30 + 4
    assert all(abs(off) <= 0.01 for off in _shares_off_reserved(budget, got).values()), got
    times = [t for t, n in grants for _ in range(n)]
    assert most_in_any(times, 1.0) <= 204


def test_throttles_keep_the_periods_credits() -> None:
    """A throttle pauses without starting a new period: the period's credits are kept, so a
    downstream throttling often (here every 0.7 s) does not hand each fresh period's first
    tokens to level 2 again and again (level 0 got 3 % of the calls)."""
    budget = TokenBudget(Budget(200, decrease=0.9), WEIGHTS, 0.0)
    got = dict.fromkeys(WEIGHTS, 0)
    for i in range(60):
        part, _ = run(budget, {2: 50, 1: 50, 0: 50}, i * 0.7, 0.7, 0.001)
        got = {level: got[level] + part[level] for level in got}
        budget.throttle((i + 1) * 0.7 - 0.0005, retry_after=0.005)
    assert budget.throttles == 60
    assert all(abs(off) <= 0.02 for off in _shares_off_reserved(budget, got).values()), got


def test_costs_overdraw_and_are_paid_back() -> None:
    budget = TokenBudget(Budget(100, burst=1, period_s=1.0), {0: 1}, 0.0)
    assert budget.grant({0: [30]}, 0.0) == {0: 1}
    assert budget.grant({0: [1]}, 0.2) == {}  # released 21 tokens, 30 spent
    assert budget.grant({0: [1]}, 0.3) == {0: 1}


def test_group_shares_scale_each_level() -> None:
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    budget.set_shares({2: 0.5, 1: 0.5, 0: 1.0}, 0.0)
    got, _ = run(budget, {2: 50, 1: 50, 0: 50}, 0.0, 10.0, 0.001)
    assert got == {2: 29 * 20, 1: 14 * 20, 0: 14 * 20}
    assert budget.local_rate == pytest.approx(114)


def test_validation_names_the_bad_value() -> None:
    with pytest.raises(ConfigError, match="'rate' must be a positive number"):
        Budget(0)
    with pytest.raises(ConfigError, match=r"'rate'.*'fast'"):
        Budget("fast")
    assert Budget("12.5").rate == 12.5
    with pytest.raises(ConfigError, match="'burst' must be at least 1"):
        Budget(10, burst=0)
    with pytest.raises(ConfigError, match="'decrease' must be in"):
        Budget(10, decrease=1.5)
    with pytest.raises(ConfigError, match=r"'resource'.*needed with several"):
        Budgets({"a": 1, "b": 2})
    with pytest.raises(ConfigError, match="budget of resource 'a'"):
        Budgets({"a": -1})
    with pytest.raises(ConfigError, match="'cost' must be a callable"):
        Budgets({"a": 1}, cost=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'retry_after'"):
        Throttled(retry_after=-1)
    budgets = Budgets({"a": 1, "b": 2}, resource=lambda r: r)
    with pytest.raises(ConfigError, match=r"returned 'c'.*known"):
        budgets.resource_of("c")
    with pytest.raises(ConfigError, match="'cost' must be at least 1"):
        Budgets({"a": 1}, cost=lambda r: 0).cost_of(None)


def test_parse_budget() -> None:
    assert parse_budget("sms=200") == ("sms", Budget(200.0))
    with pytest.raises(ConfigError, match=r"NAME=RATE.*'sms'"):
        parse_budget("sms")
    with pytest.raises(ConfigError, match=r"'sms=x'.*'rate'"):
        parse_budget("sms=x")


def test_shares_round_to_the_exact_total_and_an_unchanged_share_keeps_the_windows() -> None:
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    budget.set_shares({2: 0.5, 1: 0.5, 0: 0.5}, 0.0)
    assert sum(budget._local.values()) == 50 and budget.local_rate == pytest.approx(100)
    run(budget, {0: 50}, 0.0, 3.0, 0.001)
    assert budget.borrowing == 0
    budget.set_shares({2: 0.5, 1: 0.5, 0: 0.5}, 3.0)  # another level's group settled
    assert budget.borrowing == 0
    # A share that changes carries the windows over, scaled: level 0 borrows on at once.
    budget.set_shares({2: 1.0, 1: 1.0, 0: 0.25}, 3.0)
    assert budget.borrowing == 0
    got, _ = run(budget, {0: 50}, 3.0, 1.0, 0.001)
    # All of this process's rate (its 90 tokens a period), not level 0's reserved 4 of them.
    assert budget.local_rate == pytest.approx(180) and got[0] >= 175


@pytest.mark.parametrize("delays", [(0.0, 0.5), (0.2, 0.9)])
def test_the_window_bounds_when_calls_start_not_when_granted(delays: tuple[float, float]) -> None:
    """Granted records wait for a worker (at load 40-60: up to 0.7 s); counted at their grant,
    calls delayed unevenly bunched into one downstream second (216 and 234 calls at 200/s,
    with catch-up). Counted from their start (``started``), and until then from their grant,
    no second of starts holds more than rate + burst, whatever the delays; the price is that
    a call holds its place in the window for its delay too: at most (rate + burst) / (1 +
    mean delay) a second are spent."""
    rng = random.Random(7)
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    pending: list[tuple[float, float]] = []  # (start, granted_at), a heap
    starts: list[float] = []
    now = 0.0
    for i in range(20_000):
        now = i * 0.001
        while pending and pending[0][0] <= now:
            start, granted_at = heapq.heappop(pending)
            budget.started(start, granted_at)
            starts.append(start)
        for _ in range(sum(budget.grant(SATURATED, now).values())):
            # A stall now and then: the pool's workers run nothing for a while.
            delay = rng.uniform(*delays) if (i // 500) % 2 else delays[0]
            heapq.heappush(pending, (now + delay, now))
    assert most_in_any(sorted(starts), 1.0) <= 204
    mean_delay = (delays[0] + sum(delays) / 2) / 2
    assert len(starts) / (now - delays[1]) >= 0.9 * 204 / (1 + mean_delay)


def test_a_dropped_grant_leaves_the_window() -> None:
    budget = TokenBudget(Budget(100, burst=1, catch_up_s=1.0, period_s=2.0), {0: 1}, 0.0)
    waiting = {0: [1] * 200}
    assert budget.grant(waiting, 0.0) == {0: 1}
    assert budget.grant(waiting, 0.99) == {0: 99}  # a late caller catches up
    # The window (0.5, 1.5] holds the 99 of 0.99: room for 2 of the 51 tokens accrued since.
    assert budget.grant(waiting, 1.5) == {0: 2}
    budget.dropped(0.99, cost=50)  # 50 of them were revoked before their call
    assert budget.grant(waiting, 1.5) == {0: 49}


def test_two_processes_of_a_group_start_at_most_rate_plus_burst_together() -> None:
    """Each process's window holds its share of rate + burst, so the group's together hold
    rate + burst (each with the whole burst: 208 calls in a second at 200/s, and the downstream
    saw 212 under load), while both, late by 70 ms each time, still spend the rate."""
    halves = [TokenBudget(Budget(200), WEIGHTS, 0.0) for _ in range(2)]
    times: list[float] = []
    for half in halves:
        half.set_shares({2: 0.5, 1: 0.5, 0: 0.5}, 0.0)
        times += [t for t, n in run(half, {2: 50, 1: 50, 0: 50}, 0.0, 20.0, 0.07)[1]
                  for _ in range(n)]
    assert most_in_any(sorted(times), 1.0) <= 204
    assert len(times) >= 0.93 * 200 * 20


def test_the_rate_read_between_calls_is_the_rate_now() -> None:
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    budget.throttle(0.0, retry_after=0.1)
    budget.succeeded()
    budget.settle(0.59)
    assert budget.rate == 100  # the first step is due at 0.6
    budget.settle(0.6)
    assert budget.rate == 120


def test_a_process_holding_nothing_recovers_too() -> None:
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    budget.throttle(0.0, retry_after=0.1)
    budget.set_shares({}, 0.05)  # revoked everything while paused
    budget.succeeded()
    budget.settle(0.6)
    assert budget.rate == 120 and budget.local_rate == 0


def test_each_decrease_halves_the_catch_up() -> None:
    """Against a downstream whose own bucket is small (50 ms), catch-ups of 250 ms drew 110
    refusals in a run; each decrease now halves what a late caller catches up on."""
    budget = TokenBudget(Budget(200), WEIGHTS, 0.0)
    assert sum(budget.grant(SATURATED, 0.0).values()) == 4
    assert sum(budget.grant(SATURATED, 0.2).values()) == 40  # 200 ms late: all caught up
    budget.throttle(0.2, retry_after=0.0)  # 100/s, catch-up 125 ms
    budget.grant(SATURATED, 0.8)
    # 200 ms late at 100/s: 20 tokens, of which the bucket keeps 4 + 12.5 (25 before).
    assert sum(budget.grant(SATURATED, 1.0).values()) == 16


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_stalling_caller_and_a_refusing_downstream_keep_the_shares(seed: int) -> None:
    """Every level saturated; the caller wakes 0-30 ms late, and 1 wake in 50 stalls 0.3-3 s
    (the gate's thread on a loaded machine); a downstream of 10 tokens at the rate refuses
    the bunches of a catch-up (a throttle, retry_after 5 ms). Each level's share of the
    tokens stays within 0.5 points of reserved (1.4 to 1.9 points off before: a window that
    filled with the bucket empty, additive steps rescaled from before a skipped span, and a
    throttle dropping the bucket's tokens each left periods ending with level 0's credits
    unspent)."""
    rnd = random.Random(seed)
    budget = TokenBudget(Budget(200), {2: 58, 1: 28, 0: 14}, 0.0)
    got = dict.fromkeys(WEIGHTS, 0)
    downstream, at, now = 10.0, 0.0, 0.0
    while now < 60:
        for level, n in budget.grant(SATURATED, now).items():
            got[level] += n
            for _ in range(n):
                budget.started(now, now)
                downstream, at = min(10.0, downstream + (now - at) * 200), now
                if downstream >= 1:
                    downstream -= 1
                    budget.succeeded()
                else:
                    budget.throttle(now, retry_after=0.005)
        late = rnd.uniform(0, 0.03) + (rnd.uniform(0.3, 3.0) if rnd.random() < 0.02 else 0)
        now = max(now + 1e-6, budget.wake_at(now)) + late
    assert budget.throttles > 30  # the downstream did refuse
    assert all(abs(off) <= 0.005 for off in _shares_off_reserved(budget, got).values()), got


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shares_hold_with_calls_starting_late_and_throttles_from_the_workers(seed: int) -> None:
    """As above, but each call starts 0-0.5 s after its grant (starved workers) and its refusal
    throttles at that time, whenever the caller (the gate) last came: the benchmark's case
    under load. Each level's share of the tokens stays within 1.5 points of reserved (2.9-5.5
    points off before, level 2 60.9-63.5 % of 58 and level 0 11.2-12.5 % of 14, as the
    benchmark's runs at load 54-90 had level 0 3.3-5.3 points under)."""
    rnd = random.Random(seed)
    budget = TokenBudget(Budget(200), {2: 58, 1: 28, 0: 14}, 0.0)
    got = dict.fromkeys(WEIGHTS, 0)
    events: list[tuple[float, int, float]] = [(0.0, 0, -1.0)]  # (time, order, grant time)
    order, downstream, at = 1, 10.0, 0.0
    while events[0][0] < 60:
        now, _, granted_at = heapq.heappop(events)
        if granted_at >= 0:  # a call starts
            budget.started(now, granted_at)
            downstream, at = min(10.0, downstream + (now - at) * 200), now
            if downstream >= 1:
                downstream -= 1
                budget.succeeded()
            else:
                budget.throttle(now, retry_after=0.005)
            continue
        for level, n in budget.grant(SATURATED, now).items():
            got[level] += n
            for _ in range(n):
                heapq.heappush(events, (now + rnd.uniform(0, 0.5), order, now))
                order += 1
        late = rnd.uniform(0, 0.03) + (rnd.uniform(0.3, 3.0) if rnd.random() < 0.02 else 0)
        heapq.heappush(events, (max(now + 1e-6, budget.wake_at(now)) + late, order, -1.0))
        order += 1
    assert budget.throttles > 5  # the downstream did refuse
    assert all(abs(off) <= 0.015 for off in _shares_off_reserved(budget, got).values()), got
