"""Tests for priority_kafka.commit_plan: what each partition's commit carries."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from priority_kafka.commit_plan import CommitPlan, CommitPlanner
from priority_kafka.offset_map import OffsetMap, decode_offset_map
from priority_kafka.offsets import OffsetTracker

P = "p"


def tracked(received, done):
    """A tracker holding ``received`` offsets of P with ``done`` completed; its state."""
    tracker = OffsetTracker()
    state, _ = tracker.receive(P, sorted(received))
    state.complete(done)
    return state


def carried(plan):
    return {o for start, stop in plan.carried for o in range(start, stop)}


def test_a_commit_carries_the_offsets_done_above_its_watermark():
    """The watermark is the lowest offset not done; the metadata holds what finished above."""
    planner = CommitPlanner(4096)
    plan = planner.plan(P, tracked(range(10, 20), [10, 11, 13, 14, 17]))
    assert plan.offset == 12
    assert carried(plan) == {13, 14, 17}
    assert set(decode_offset_map(plan.metadata, 12).map) == {13, 14, 17}
    assert plan.left_out == 0


def test_without_maps_a_commit_is_the_watermark_alone():
    """max_bytes None: no metadata, as before offset maps."""
    plan = CommitPlanner(None).plan(P, tracked(range(10, 20), [10, 11, 13]))
    assert plan == CommitPlan(12)


def test_a_commit_is_planned_again_only_when_the_watermark_or_the_map_changed():
    """The same plan is not committed twice; a new completion above the watermark is news."""
    planner = CommitPlanner(4096)
    state = tracked(range(0, 10), [0, 5])
    plan = planner.plan(P, state)
    planner.committed(P, plan)
    assert planner.plan(P, state) is None
    state.complete([7])
    again = planner.plan(P, state)
    assert again.offset == 1 and carried(again) == {5, 7}
    planner.committed(P, again)
    state.complete([1, 2, 3, 4])
    assert planner.plan(P, state).offset == 6


def test_a_map_that_does_not_fit_carries_its_lowest_offsets():
    """At a small bound the plan says how many offsets it left out (replayed after a crash)."""
    rng = random.Random(5)
    done = [o for o in range(1, 4000) if rng.random() < 0.5]
    plan = CommitPlanner(64).plan(P, tracked(range(0, 4000), done))
    assert len(plan.metadata) <= 64 and plan.left_out > 0
    assert carried(plan) == set(done[:len(done) - plan.left_out])


def test_records_the_inherited_commit_covers_are_skipped():
    """Taken on at offset 10 with 12, 13 and 15 done: those records are split off as done."""
    planner = CommitPlanner(4096)
    planner.inherit(P, 10, OffsetMap(10, 16, ((12, 14), (15, 16))))
    offsets = list(range(10, 18))
    assert [offsets[i] for i in planner.split(P, offsets)] == [12, 13, 15]
    assert not planner.inherits(P)  # received past the map: the tracker knows the rest


def test_inherited_offsets_not_received_yet_stay_in_every_commit():
    """A second crash before the records arrive does not forget what the first owner did."""
    planner = CommitPlanner(4096)
    planner.inherit(P, 10, OffsetMap(10, 101, ((50, 60), (100, 101))))
    assert planner.split(P, [10, 11, 12]) == []
    state = tracked([10, 11, 12], [11])
    plan = planner.plan(P, state)
    assert plan.offset == 10
    assert carried(plan) == {11, *range(50, 60), 100}


def test_a_watermark_at_inherited_done_offsets_moves_past_them():
    """Everything received is done and the next offsets are done by the map: commit past
    them, so no commit of ours covers less than the one the partition was taken on with."""
    planner = CommitPlanner(4096)
    planner.inherit(P, 10, OffsetMap(10, 20, ((11, 15), (18, 20))))
    planner.split(P, [10])
    plan = planner.plan(P, tracked([10], [10]))
    assert plan.offset == 15 and carried(plan) == {18, 19}


def test_records_below_the_inherited_commit_were_sought_back_on_purpose():
    """A first record below the commit (the user sought back): nothing is skipped, and the
    commits start again from the watermark."""
    planner = CommitPlanner(4096)
    planner.inherit(P, 100, OffsetMap(100, 103, ((101, 103),)))
    assert planner.split(P, [0, 1, 101]) == []
    assert planner.plan(P, tracked([0, 1, 101], [0])).offset == 1


def test_a_commit_covers_its_watermark_and_map():
    """What a reader of a commit skips: offsets below its watermark, and those it carries."""
    plan = CommitPlan(13, "m", ((14, 16), (20, 22)))
    assert [o for o in range(0, 30) if plan.covers(o)] == [*range(13), 14, 15, 20, 21]


def test_forget_drops_the_partition():
    """A revoked partition keeps nothing: its next owner reads the commit again."""
    planner = CommitPlanner(4096)
    planner.inherit(P, 10, OffsetMap(10, 12, ((11, 12),)))
    planner.forget(P)
    assert not planner.inherits(P) and planner.last(P) is None


def test_shrink_halves_the_bound():
    """The broker refused a map: the next plans fit half the bound."""
    planner = CommitPlanner(100)
    assert planner.shrink() == 50 and planner.max_bytes == 50


@settings(deadline=None)
@given(
    st.sets(st.integers(0, 300), max_size=150),
    st.sets(st.integers(0, 300), max_size=150),
    st.integers(0, 50),
    st.sampled_from([None, 40, 4096]),
)
def test_a_commit_covers_only_done_offsets_and_all_the_inherited_commit_did(
    done_before, done_now, received_to, max_bytes
):
    """Safety: a plan never covers an offset that is not done (done here, or covered by the
    commit the partition was taken on with); and it covers all that commit covered, so no
    finished record is handed out again after our commit."""
    base = 20
    inherited_done = {o for o in done_before if o > base}
    ranges = []
    for offset in sorted(inherited_done):
        if ranges and ranges[-1][1] == offset:
            ranges[-1] = (ranges[-1][0], offset + 1)
        else:
            ranges.append((offset, offset + 1))
    planner = CommitPlanner(max_bytes)
    planner.inherit(P, base, OffsetMap(base, 301, tuple(ranges)) if ranges else None)
    received = list(range(base, base + received_to + 1))
    skipped = {received[i] for i in planner.split(P, received)}
    state = tracked(received, skipped | (done_now & set(received)))
    plan = planner.plan(P, state)
    done = {o for o in received if o in skipped or o in done_now}
    if plan is None:
        return
    for offset in range(0, 302):
        if plan.covers(offset) and offset >= base:
            assert offset in done or (
                offset > received[-1] and offset in inherited_done
            ), (offset, plan)
    if max_bytes == 4096:
        inherited = CommitPlan(base, "", tuple(ranges))
        assert all(plan.covers(o) for o in range(0, 302) if inherited.covers(o))


@pytest.mark.parametrize("offsets", [[], [5]])
def test_split_without_an_inherited_commit_skips_nothing(offsets):
    """Partitions not taken on from a commit (or maps off) skip nothing."""
    assert CommitPlanner(4096).split(P, offsets) == []


def test_a_record_finishing_at_the_watermark_while_planning_is_left_for_the_next_commit():
    """A worker may mark the watermark's record done between the tracker's two scans: the
    map never claims the committed offset itself (which the codec refuses)."""

    class Racing:
        last_received = 9

        def watermark(self):
            return 3

        def completed_ranges(self):
            return [(3, 5), (7, 9)]  # offset 3 finished after the watermark was read

    plan = CommitPlanner(4096).plan(P, Racing())
    assert plan.offset == 3 and plan.carried == ((4, 5), (7, 9))
