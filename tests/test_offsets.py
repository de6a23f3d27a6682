"""Tests of priority_kafka.offsets: the commit watermark under gaps and out-of-order completion."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from priority_kafka.errors import ConfigError, IllegalStateError
from priority_kafka.offsets import OffsetTracker


@st.composite
def offsets_and_order(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Increasing offsets with random gaps, and a random completion order of their indices."""
    gaps = draw(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=60))
    start = draw(st.integers(min_value=0, max_value=1000))
    offsets = [start + sum(gaps[: i + 1]) for i in range(len(gaps))]
    order = draw(st.permutations(range(len(offsets))))
    return offsets, list(order)


@given(offsets_and_order())
def test_watermark_never_passes_an_unfinished_record(case: tuple[list[int], list[int]]) -> None:
    """After any prefix of completions, the committable offset is <= every unfinished offset."""
    offsets, order = case
    tracker: OffsetTracker[str] = OffsetTracker()
    epoch = 0
    for offset in offsets:
        epoch = tracker.received("p", offset)
    unfinished = set(offsets)
    last = None
    for index in order:
        assert tracker.completed("p", offsets[index], epoch)
        unfinished.discard(offsets[index])
        mark = tracker.committable("p")
        if mark is not None:
            assert all(mark <= offset for offset in unfinished)
            assert last is None or mark > last
            tracker.mark_committed("p", mark)
            last = mark
        assert tracker.in_flight("p") == len(unfinished)
    assert last == offsets[-1] + 1
    assert tracker.committable("p") is None


@given(offsets_and_order(), st.integers(min_value=0, max_value=60))
def test_watermark_is_the_lowest_unfinished_offset(
    case: tuple[list[int], list[int]], done_count: int
) -> None:
    """The committable offset is exactly the lowest unfinished received offset."""
    offsets, order = case
    tracker: OffsetTracker[str] = OffsetTracker()
    for offset in offsets:
        epoch = tracker.received("p", offset)
    done = {offsets[i] for i in order[:done_count]}
    for offset in done:
        tracker.completed("p", offset, epoch)
    unfinished = [o for o in offsets if o not in done]
    expected = unfinished[0] if unfinished else offsets[-1] + 1
    assert tracker.committable("p") == expected


def test_nothing_received_means_nothing_to_commit() -> None:
    """An unknown partition has no committable offset and nothing in flight."""
    tracker: OffsetTracker[str] = OffsetTracker()
    assert tracker.committable("p") is None
    assert tracker.in_flight("p") == 0
    assert tracker.in_flight() == 0


def test_committable_reports_only_progress() -> None:
    """After mark_committed, the same watermark is not reported again."""
    tracker: OffsetTracker[str] = OffsetTracker()
    epoch = tracker.received("p", 7)
    assert tracker.committable("p") == 7
    tracker.completed("p", 7, epoch)
    assert tracker.committable("p") == 8
    tracker.mark_committed("p", 8)
    assert tracker.committable("p") is None


def test_completions_of_an_earlier_epoch_are_ignored() -> None:
    """A completion from before forget() does not move the re-assigned partition's watermark."""
    tracker: OffsetTracker[str] = OffsetTracker()
    old = tracker.received("p", 10)
    tracker.forget("p")
    new = tracker.received("p", 10)
    assert new != old
    assert not tracker.completed("p", 10, old)
    assert tracker.committable("p") == 10
    assert tracker.completed("p", 10, new)
    assert tracker.committable("p") == 11


def test_unknown_and_repeated_completions_are_ignored() -> None:
    """Completing an offset never received, or twice, has no effect."""
    tracker: OffsetTracker[str] = OffsetTracker()
    epoch = tracker.received("p", 5)
    tracker.received("p", 9)
    assert not tracker.completed("p", 7, epoch)  # a gap
    assert not tracker.completed("q", 5, epoch)
    assert tracker.completed("p", 5, epoch)
    assert not tracker.completed("p", 5, epoch)
    assert tracker.in_flight("p") == 1
    assert tracker.committable("p") == 9


def test_offsets_must_increase() -> None:
    """A received offset not above the last one is a state error naming both."""
    tracker: OffsetTracker[str] = OffsetTracker()
    tracker.received("p", 5)
    with pytest.raises(IllegalStateError, match="got 5 after 5"):
        tracker.received("p", 5)


def test_negative_offset_is_rejected() -> None:
    """A negative offset is a ConfigError naming the value."""
    with pytest.raises(ConfigError, match="'offset' must be at least 0"):
        OffsetTracker().received("p", -1)


def test_partitions_are_independent() -> None:
    """In-flight counts and watermarks are kept per partition."""
    tracker: OffsetTracker[str] = OffsetTracker()
    ea = tracker.received("a", 1)
    tracker.received("b", 1)
    tracker.completed("a", 1, ea)
    assert tracker.committable("a") == 2
    assert tracker.committable("b") == 1
    assert tracker.in_flight() == 1
    assert sorted(tracker.partitions()) == ["a", "b"]


def test_uncommitted_counts_from_the_watermark_done_or_not():
    """A stuck record keeps every later record uncommitted, finished or not."""
    tracker = OffsetTracker()
    epoch = 0
    for offset in range(10):
        epoch = tracker.received("p", offset)
    for offset in range(1, 10):
        tracker.completed("p", offset, epoch)
    assert tracker.in_flight("p") == 1
    assert tracker.uncommitted("p") == 10
    tracker.completed("p", 0, epoch)
    assert tracker.uncommitted("p") == 0
    assert tracker.uncommitted("unknown") == 0
