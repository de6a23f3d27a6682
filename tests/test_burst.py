"""Tests for priority_kafka.burst: history windows and the capacity-burst rule."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from priority_kafka.burst import CapacityBurst, Round, allocate
from priority_kafka.errors import ConfigError

RESERVED = {2: 29, 1: 14, 0: 7}


def fed(windows, reserved=RESERVED, **kwargs):
    """A CapacityBurst whose windows hold ``windows`` ({level: counts oldest first})."""
    burst = CapacityBurst(reserved, **kwargs)
    for column in zip(*windows.values(), strict=True):
        burst.record(dict(zip(windows, column, strict=True)))
    return burst


def reference_quotas(reserved, windows, threshold):
    """The design's rule, written out level by level without numpy, as an oracle."""
    unused = {level: max(0, reserved[level] - max(windows[level])) for level in reserved}
    quotas = dict(reserved)
    for level in sorted(reserved, reverse=True):
        maxed = sum(count >= reserved[level] for count in windows[level])
        if maxed >= threshold:
            quotas[level] += sum(unused.values()) - unused[level]
            break
    return quotas


def test_design_example_top_level_bursts_with_level_one_spare():
    """Level 2 maxed out takes level 1's unused 14 - 10 = 4 (level 0 has none): 33."""
    burst = fed({2: [29] * 6, 1: [10, 10, 7, 10, 9, 0], 0: [7] * 6})
    assert burst.quotas() == {2: 33, 1: 14, 0: 7}
    assert burst.bursting_level == 2


def test_design_example_lowest_level_bursts_when_higher_ones_never_max_out():
    """Level 2 (max 25 < 29) and level 1 (max 10 < 14) never max out; level 0 gets 7 + 4 + 4."""
    burst = fed({2: [20, 25, 25, 20, 15, 10], 1: [10, 10, 7, 10, 9, 0], 0: [7] * 6})
    assert burst.quotas() == {2: 29, 1: 14, 0: 15}
    assert burst.bursting_level == 0


def test_design_example_nobody_bursts_when_the_eligible_level_has_nothing_to_take():
    """Level 1 maxes out 3 < 4 times; level 2 is eligible but nobody has spare, so none burst.

    Level 0 is eligible too: the highest eligible level with nothing to take blocks it.
    """
    burst = fed({2: [29] * 6, 1: [14, 14, 14, 11, 10, 9], 0: [7] * 6})
    assert burst.quotas() == RESERVED
    assert burst.bursting_level is None


def test_only_the_highest_eligible_level_bursts():
    """Level 0 is eligible in both cases, but it bursts only while level 2 is not eligible."""
    spare_one_each = {1: [13, 13, 13, 11, 10, 9], 0: [7] * 6}
    burst = fed({2: [28, 28, 28, 20, 20, 20], **spare_one_each})
    assert burst.quotas() == {2: 29, 1: 14, 0: 7 + 1 + 1}
    burst = fed({2: [29] * 6, **spare_one_each})
    assert burst.quotas() == {2: 29 + 1 + 0, 1: 14, 0: 7}


def test_only_level_zero_loaded_takes_the_whole_poll_after_four_maxed_polls():
    """Levels 1 and 2 idle: three maxed polls are not enough, the fourth gives 7 + 14 + 29."""
    burst = CapacityBurst(RESERVED)
    for _ in range(3):
        burst.record({0: 7})
        assert burst.quotas() == RESERVED
    burst.record({0: 7})
    assert burst.quotas() == {2: 29, 1: 14, 0: 50}
    assert burst.bursting_level == 0


def test_a_level_that_gets_busy_stops_lending_at_once():
    """One record on level 2 cuts the capacity it lends by one on the very next poll."""
    burst = fed({0: [50, 50, 50, 50]})
    assert burst.quotas()[0] == 50
    burst.record({2: 1, 0: 50})
    assert burst.quotas() == {2: 29, 1: 14, 0: 7 + 14 + 28}


def test_maxed_out_is_judged_against_the_reserved_quota():
    """A bursting level that returns its reserved quota (not its burst quota) still maxes out."""
    burst = fed({0: [7, 7, 7, 7]})
    for _ in range(5):
        assert burst.quotas()[0] == 50
        burst.record({0: 8})
    assert burst.burst_counts == {2: 0, 1: 0, 0: 5}


def test_quotas_does_not_change_the_windows():
    """quotas() only reads history; calling it twice gives the same answer."""
    burst = fed({2: [29] * 6, 1: [10, 10, 7, 10, 9, 0], 0: [7] * 6})
    windows = burst.windows
    assert burst.quotas() == burst.quotas()
    assert burst.windows == windows


def test_windows_start_as_zeros_and_keep_the_last_counts_oldest_first():
    """Windows are pre-filled with zeros and drop the oldest count first."""
    burst = CapacityBurst({1: 3, 0: 1}, window_size=3, maxout_threshold=2)
    assert burst.windows == {1: (0, 0, 0), 0: (0, 0, 0)}
    for count in range(1, 6):
        burst.record({1: count})
    assert burst.windows == {1: (3, 4, 5), 0: (0, 0, 0)}
    assert list(burst.windows) == [1, 0]


def test_missing_level_records_zero():
    """A level absent from the counts recorded an empty poll."""
    burst = CapacityBurst(RESERVED, window_size=2, maxout_threshold=1)
    burst.record({2: 5, 0: 3})
    burst.record({})
    assert burst.windows == {2: (5, 0), 1: (0, 0), 0: (3, 0)}


def test_single_level_never_bursts():
    """With one level there is no one to borrow from."""
    burst = fed({0: [10] * 6}, reserved={0: 10})
    assert burst.quotas() == {0: 10}
    assert burst.bursting_level is None


def test_bursting_level_resets_when_nobody_bursts():
    """bursting_level describes the last quotas() call only."""
    burst = CapacityBurst(RESERVED, window_size=1, maxout_threshold=1)
    assert burst.bursting_level is None
    burst.record({0: 7})
    burst.quotas()
    assert burst.bursting_level == 0
    burst.record({2: 29, 1: 14, 0: 7})
    burst.quotas()
    assert burst.bursting_level is None


def test_reserved_is_a_copy_ordered_highest_first():
    """reserved comes back highest level first, and changing it changes nothing inside."""
    burst = CapacityBurst({0: 7, 1: 14, 2: 29})
    reserved = burst.reserved
    assert list(reserved) == [2, 1, 0]
    reserved[0] = 1000
    assert burst.reserved == RESERVED
    assert burst.max_priority == 3


def test_repr_shows_the_configuration():
    """The repr is the expression that builds an equivalent (fresh) object."""
    assert repr(CapacityBurst({0: 7, 1: 14, 2: 29}, window_size=5, maxout_threshold=2)) == (
        "CapacityBurst(reserved={2: 29, 1: 14, 0: 7}, window_size=5, maxout_threshold=2)"
    )


@pytest.mark.parametrize(
    "reserved",
    [[7, 14], {}, {1: 14, 2: 29}, {0: 7, 2: 29}, {False: 7}, {"0": 7}, {0: -1}, {0: 7.0}],
)
def test_bad_reserved_is_rejected_naming_it(reserved):
    """reserved must map exactly levels 0..N-1 to non-negative ints."""
    with pytest.raises(ConfigError, match=r"'reserved.*\(got "):
        CapacityBurst(reserved)


@pytest.mark.parametrize(
    ("kwargs", "name", "bad"),
    [
        ({"window_size": 0}, "window_size", 0),
        ({"window_size": "6"}, "window_size", "6"),
        ({"maxout_threshold": 0}, "maxout_threshold", 0),
        ({"maxout_threshold": 7}, "maxout_threshold", 7),
        ({"window_size": 3, "maxout_threshold": 4}, "maxout_threshold", 4),
        ({"maxout_threshold": 2.5}, "maxout_threshold", 2.5),
    ],
)
def test_bad_window_settings_are_rejected_naming_them(kwargs, name, bad):
    """window_size must be >= 1 and maxout_threshold within 1..window_size."""
    with pytest.raises(ConfigError, match=rf"'{name}'.*\(got {re.escape(repr(bad))}\)"):
        CapacityBurst(RESERVED, **kwargs)


@pytest.mark.parametrize(
    ("counts", "bad"),
    [
        ([7], "[7]"),
        ({3: 1}, "{3: 1}"),
        ({True: 1}, "{True: 1}"),
        ({0: -1}, "-1"),
        ({0: 1.5}, "1.5"),
        ({1: 2, 0: False}, "False"),
    ],
)
def test_bad_counts_are_rejected_and_nothing_is_recorded(counts, bad):
    """record() rejects unknown levels and bad counts, leaving the windows as they were."""
    burst = fed({2: [3, 4], 1: [5, 6], 0: [1, 2]})
    windows = burst.windows
    with pytest.raises(ConfigError, match=rf"'counts.*\(got .*{re.escape(bad)}"):
        burst.record(counts)
    assert burst.windows == windows


@st.composite
def bursts_and_polls(draw):
    """A random configuration and a random sequence of per-level poll counts."""
    n = draw(st.integers(min_value=1, max_value=5))
    reserved = {level: draw(st.integers(min_value=0, max_value=40)) for level in range(n)}
    window_size = draw(st.integers(min_value=1, max_value=8))
    threshold = draw(st.integers(min_value=1, max_value=window_size))
    polls = draw(
        st.lists(
            st.dictionaries(st.sampled_from(range(n)), st.integers(min_value=0, max_value=60)),
            max_size=30,
        )
    )
    return CapacityBurst(reserved, window_size, threshold), polls


@given(bursts_and_polls())
def test_quotas_follow_the_rule_on_any_history(case):
    """On any history the quotas follow the rule: never below reserved, at most one level above.

    The one level above reserved gets exactly the other levels' unused capacity, so the quotas
    sum to sum(reserved) plus that burst.
    """
    burst, polls = case
    reserved = burst.reserved
    bursts = dict.fromkeys(reserved, 0)
    for counts in [{}, *polls]:
        burst.record(counts)
        windows = burst.windows
        quotas = burst.quotas()
        assert quotas == reference_quotas(reserved, windows, burst.maxout_threshold)
        assert list(quotas) == list(reserved)
        above = [level for level in quotas if quotas[level] > reserved[level]]
        assert all(quotas[level] >= reserved[level] for level in quotas)
        assert above == ([] if burst.bursting_level is None else [burst.bursting_level])
        if above:
            bursts[above[0]] += 1
            unused = sum(
                max(0, reserved[level] - max(windows[level]))
                for level in reserved
                if level != above[0]
            )
            assert sum(quotas.values()) == sum(reserved.values()) + unused
        else:
            assert sum(quotas.values()) == sum(reserved.values())
    assert burst.burst_counts == bursts


def test_allocate_takes_the_excess_from_the_borrower_first() -> None:
    """A lender with records again gets its reserved share; the bursting level gives way."""
    quotas = {2: 29 + 21, 1: 14, 0: 7}  # level 2 borrowed levels 1 and 0's shares
    assert allocate(quotas, {2: 1000, 1: 14, 0: 7}, 50, bursting=2) == {2: 29, 1: 14, 0: 7}
    assert allocate(quotas, {2: 1000, 1: 3, 0: 0}, 50, bursting=2) == {2: 47, 1: 3, 0: 0}


def test_allocate_without_burst_trims_the_lowest_levels_first() -> None:
    """A total below the reserved quotas serves the highest levels first."""
    quotas = {2: 29, 1: 14, 0: 7}
    assert allocate(quotas, {2: 100, 1: 100, 0: 100}, 35) == {2: 29, 1: 6, 0: 0}
    assert allocate(quotas, {2: 0, 1: 100, 0: 100}, 100) == {2: 0, 1: 14, 0: 7}


@st.composite
def allocation_inputs(draw):
    levels = draw(st.integers(1, 5))
    reserved = {level: draw(st.integers(0, 50)) for level in reversed(range(levels))}
    bursting = draw(st.none() | st.sampled_from(sorted(reserved)))
    quotas = dict(reserved)
    if bursting is not None:
        quotas[bursting] += draw(st.integers(0, 100))
    available = {level: draw(st.integers(0, 200)) for level in reserved}
    total = draw(st.integers(0, 300))
    return reserved, quotas, available, total, bursting


@given(allocation_inputs())
def test_allocate_invariants(inputs) -> None:
    """Never over the total or a quota or what is available; reserved shares kept when they fit."""
    reserved, quotas, available, total, bursting = inputs
    admitted = allocate(quotas, available, total, bursting)
    assert list(admitted) == list(quotas)
    assert sum(admitted.values()) <= total
    for level, count in admitted.items():
        assert 0 <= count <= min(quotas[level], available[level])
    if sum(reserved.values()) <= total:
        for level, count in admitted.items():
            assert count >= min(reserved[level], available[level])
    assert admitted == allocate(quotas, available, total, bursting)


def _asking(available):
    """An ``ask`` over fixed per-level records ``(level, n)``; levels by position, highest first."""
    left = dict(available)
    levels = sorted(available, reverse=True)

    def ask(position, want, taken):
        level = levels[position]
        got = min(want, left[level])
        start = available[level] - left[level]
        left[level] -= got
        return [(level, n) for n in range(start, start + got)]

    return ask


@st.composite
def rounds(draw):
    """A burst state after a random history, fixed records per level, and a budget cycle."""
    burst, polls = draw(bursts_and_polls())
    for counts in polls:
        burst.record(counts)
    total = draw(st.integers(max(1, sum(burst.reserved.values())), 250))
    available = {level: draw(st.integers(0, 150)) for level in burst.reserved}
    budgets = draw(st.lists(st.integers(1, 300), min_size=1, max_size=6))
    return burst, total, available, budgets


@given(rounds())
def test_a_round_serves_what_allocate_admits_however_the_budgets_cut_it(case) -> None:
    """Summed over one round, each level returns allocate()'s share; each piece is within its
    budget and highest level first, and the round's counts go to the burst windows."""
    burst, total, available, budgets = case
    quotas, bursting = burst.quotas(), burst.bursting_level  # what the round starts with
    served = Round(burst, total, _asking(available))
    assert served.levels == tuple(sorted(available, reverse=True))
    totals = dict.fromkeys(quotas, 0)
    for k in range(total + 1):
        budget = budgets[k % len(budgets)]
        piece = served.take(budget)
        assert len(piece) <= budget
        assert [level for level, _ in piece] == sorted((lv for lv, _ in piece), reverse=True)
        for level, _ in piece:
            totals[level] += 1
        if served.left == total and not any(served.counts.values()):
            break  # the round ended (a take that serves nothing always ends it)
    else:
        raise AssertionError(f"the round never ended: {served!r}")
    assert totals == allocate(quotas, available, total, bursting)
    assert {level: window[-1] for level, window in burst.windows.items()} == totals


def test_a_failed_ask_keeps_what_was_taken_and_the_round_goes_on() -> None:
    """When ``ask`` returns None, the records taken so far are returned and counted."""
    burst = CapacityBurst({2: 4, 1: 2, 0: 1})
    fail = {1}

    def ask(position, want, taken):
        return None if position in fail else [2 - position] * want

    served = Round(burst, 7, ask)
    assert served.take(7) == [2, 2, 2, 2]
    assert served.counts == {2: 4, 1: 0, 0: 0}
    assert served.left == 3
    fail.clear()
    assert served.take(7) == [1, 1, 0]
    assert served.left == 7  # the round was full, and a new one started
    assert burst.windows[2][-1] == 4 and burst.windows[1][-1] == 2


def test_first_and_took_count_a_record_waited_for() -> None:
    """A record waited for outside take() spends its level's credit, then its extra."""
    burst = CapacityBurst({1: 2, 0: 1}, window_size=1, maxout_threshold=1)
    burst.record({1: 2, 0: 0})  # level 1 maxed out, level 0 idle: level 1 borrows its 1
    served = Round(burst, 3, lambda position, want, taken: [])
    assert served.first() == 0  # position 0 is level 1
    served.took(0, 2)
    assert served.first() == 0  # its extra is left
    served.took(0, 1)
    assert served.left == 3 and burst.windows[1][-1] == 3  # the round was full: a new one


def test_with_room_names_every_level_the_round_can_still_serve_highest_first() -> None:
    """The aio consumer waits on all of these at once: a level whose share is spent is left
    out, a borrower with extra left stays in."""
    burst = CapacityBurst({2: 2, 1: 1, 0: 1}, window_size=1, maxout_threshold=1)
    burst.record({2: 2, 1: 0, 0: 1})  # level 2 maxed out, level 1 idle: level 2 borrows its 1
    served = Round(burst, 5, lambda position, want, taken: [])
    assert served.with_room() == [0, 1, 2]  # positions: levels 2, 1, 0
    served.took(0, 2)
    assert served.with_room() == [0, 1, 2]  # level 2's extra is left
    served.took(0, 1)
    served.took(2, 1)
    assert served.with_room() == [1]


def test_round_rejects_a_total_below_the_reserved_quotas_naming_it() -> None:
    """A round serves every reserved share, so they must fit in its total."""
    with pytest.raises(ConfigError, match=r"'total' must be at least 3 \(got 2\)"):
        Round(CapacityBurst({1: 2, 0: 1}), 2, lambda position, want, taken: [])
    with pytest.raises(ConfigError, match=r"'total' must be at least 1 \(got 0\)"):
        Round(CapacityBurst({0: 0}), 0, lambda position, want, taken: [])


def test_round_repr_shows_the_state() -> None:
    served = Round(CapacityBurst({1: 2, 0: 1}), 3, lambda position, want, taken: [])
    assert repr(served) == (
        "Round(credit={1: 2, 0: 1}, extra={1: 0, 0: 0}, left=3)"
    )


def test_history_is_an_immutable_copy_of_the_windows_and_burst_counts() -> None:
    """history() is the windows' rings (oldest slot given) and the burst counts, as tuples that
    later records do not change."""
    burst = fed({2: [29, 29, 29, 29], 1: [3, 0, 0, 0], 0: [7, 7, 7, 7]})
    burst.quotas()
    rings, oldest, bursts = burst.history()
    assert {lv: rings[lv][oldest:] + rings[lv][:oldest] for lv in (2, 1, 0)} == burst.windows
    assert bursts == tuple(burst.burst_counts[lv] for lv in range(3))
    burst.record({2: 1, 1: 1, 0: 1})
    assert burst.history()[0] != rings and rings[2].count(29) == 4
