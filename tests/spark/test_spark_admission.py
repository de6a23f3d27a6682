"""Tests for priority_kafka.spark.admission: per-trigger limits per level, with capacity burst."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from priority_kafka.burst import CapacityBurst
from priority_kafka.distributors import ExponentialDistributor, distribute
from priority_kafka.spark.admission import AdmissionControl

pytestmark = pytest.mark.spark


def new_control(max_priority=3):
    """An AdmissionControl with the exponential split and the design's window (6) and T (4)."""
    return AdmissionControl(
        max_priority,
        lambda limit: CapacityBurst(distribute(ExponentialDistributor(), max_priority, limit)),
    )


def run(control, start, latest, limit):
    """Admit one trigger and return (admitted per level, the new start offsets)."""
    admission = control.admit(start, latest, limit)
    return admission.admitted, admission.end


def test_backlog_on_every_level_admits_29_14_7_of_50():
    """With backlog everywhere, each trigger takes the reserved split of the limit."""
    control = new_control()
    start = {("o-2", 0): 0, ("o-1", 0): 0, ("o-0", 0): 0}
    latest = dict.fromkeys(start, 10_000)
    for _ in range(10):
        admitted, start = run(control, start, latest, 50)
        assert admitted == {2: 29, 1: 14, 0: 7}
    assert start == {("o-2", 0): 290, ("o-1", 0): 140, ("o-0", 0): 70}


def test_an_idle_level_lends_its_share_after_a_window():
    """Once level 2 has been idle for a whole window, busy level 1 takes its 29 as well."""
    control = new_control()
    start = {("o-2", 0): 0, ("o-1", 0): 0, ("o-0", 0): 0}
    latest = {("o-2", 0): 0, ("o-1", 0): 10_000, ("o-0", 0): 10_000}
    history = []
    for _ in range(8):
        admitted, start = run(control, start, latest, 50)
        history.append(admitted)
    # Four maxed-out triggers make level 1 eligible; level 2's window was all zeros from the
    # start, so the fifth trigger already bursts.
    assert history[:4] == [{2: 0, 1: 14, 0: 7}] * 4
    assert history[4:] == [{2: 0, 1: 43, 0: 7}] * 4


def test_a_level_that_catches_up_stops_bursting():
    """The burst is capped by the backlog: a level never reads past what is available."""
    control = new_control()
    start = {("o-2", 0): 0, ("o-1", 0): 0, ("o-0", 0): 0}
    latest = {("o-2", 0): 0, ("o-1", 0): 100, ("o-0", 0): 0}
    taken = []
    for _ in range(7):
        admitted, start = run(control, start, latest, 50)
        taken.append(admitted[1])
    assert taken == [14, 14, 14, 14, 44, 0, 0]
    assert start[("o-1", 0)] == 100


def test_a_lender_with_backlog_again_takes_its_share_back_within_the_limit():
    """When idle level 2 gets records in the trigger that lends its 29, level 1 gives them back."""
    control = new_control()
    start = {("o-2", 0): 0, ("o-1", 0): 0, ("o-0", 0): 0}
    latest = {("o-2", 0): 0, ("o-1", 0): 10_000, ("o-0", 0): 10_000}
    for _ in range(4):
        _, start = run(control, start, latest, 50)
    latest[("o-2", 0)] = 1_000
    admission = control.admit(start, latest, 50)
    assert admission.quotas == {2: 29, 1: 43, 0: 7}  # the burst was granted ...
    assert admission.admitted == {2: 29, 1: 14, 0: 7}  # ... and handed back at once


def test_without_a_limit_everything_available_is_admitted():
    """ReadAllAvailable (no limit) reads every partition up to its latest offset."""
    control = new_control()
    admission = control.admit({("o-2", 0): 3}, {("o-2", 0): 90, ("o-0", 1): 5}, None)
    assert admission.end == {("o-2", 0): 90, ("o-0", 1): 5}
    assert admission.admitted == {2: 87, 1: 0, 0: 5}
    assert admission.quotas == {}


def test_a_level_splits_its_count_across_partitions_by_backlog():
    """Level 2's 29 go to its partitions in proportion to their backlog (1:3)."""
    control = new_control()
    start = {("o-2", 0): 0, ("o-2", 1): 0, ("o-1", 0): 0, ("o-0", 0): 0}
    latest = {("o-2", 0): 100, ("o-2", 1): 300, ("o-1", 0): 1000, ("o-0", 0): 1000}
    _, end = run(control, start, latest, 50)
    assert (end[("o-2", 0)], end[("o-2", 1)]) == (7, 22)


def test_a_partition_behind_its_start_is_left_where_it_is():
    """A latest offset below the start (a recreated topic) admits nothing there."""
    control = new_control()
    admission = control.admit({("o-2", 0): 50}, {("o-2", 0): 10}, 50)
    assert admission.end == {("o-2", 0): 50}
    assert admission.admitted[2] == 0


@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["o-0", "o-1", "o-2"]), st.integers(0, 3)),
        st.tuples(st.integers(0, 500), st.integers(0, 500)),
        min_size=1,
    ),
    st.integers(7, 300),
    st.integers(1, 12),
)
def test_admission_never_exceeds_the_limit_or_the_backlog(partitions, limit, triggers):
    """Every trigger stays within its limit, moves offsets only forward and never past latest."""
    control = new_control()
    start = {tp: begin for tp, (begin, _) in partitions.items()}
    latest = {tp: begin + extra for tp, (begin, extra) in partitions.items()}
    for _ in range(triggers):
        admission = control.admit(start, latest, limit)
        assert sum(admission.end[tp] - start[tp] for tp in start) == sum(
            admission.admitted.values()
        ) <= limit
        assert all(start[tp] <= admission.end[tp] <= latest[tp] for tp in start)
        start = admission.end


@given(
    st.lists(
        st.fixed_dictionaries({level: st.sampled_from([0, 0, 5, 40, 200]) for level in range(3)}),
        min_size=1, max_size=25,
    ),
    st.integers(7, 120),
)
def test_with_arrivals_every_trigger_keeps_the_limit_and_reserved_shares(arrivals, limit):
    """However records arrive, a trigger never exceeds the limit and a level with backlog gets
    at least its reserved share (or all it has)."""
    control = new_control()
    reserved = distribute(ExponentialDistributor(), 3, limit)
    start = {(f"o-{level}", 0): 0 for level in range(3)}
    latest = dict(start)
    for arrived in arrivals:
        latest = {(f"o-{lv}", 0): latest[(f"o-{lv}", 0)] + arrived[lv] for lv in range(3)}
        admission = control.admit(start, latest, limit)
        assert sum(admission.admitted.values()) <= limit
        for level in range(3):
            assert admission.admitted[level] >= min(reserved[level], admission.available[level])
        start = admission.end
