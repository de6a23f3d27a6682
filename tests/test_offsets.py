"""Tests of priority_kafka.offsets: the commit watermark under gaps and out-of-order completion."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from priority_kafka.errors import ConfigError
from priority_kafka.offsets import OffsetTracker


@st.composite
def offsets_and_order(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Increasing offsets with random gaps (some past a 4,096-offset block), received in random
    polls, and a random completion order of their indices."""
    gaps = draw(st.lists(st.sampled_from([1, 1, 1, 2, 5, 4000, 9000]), min_size=1, max_size=60))
    start = draw(st.integers(min_value=0, max_value=10_000))
    offsets = [start + sum(gaps[: i + 1]) for i in range(len(gaps))]
    order = draw(st.permutations(range(len(offsets))))
    return offsets, list(order)


def polls(offsets: list[int], cuts: list[int]) -> list[list[int] | range]:
    """``offsets`` cut into consecutive polls; a contiguous poll as a range, as the ledger does."""
    bounds = sorted({0, len(offsets), *(c % (len(offsets) + 1) for c in cuts)})
    chunks: list[list[int] | range] = []
    for low, high in itertools.pairwise(bounds):
        chunk = offsets[low:high]
        contiguous = chunk[-1] - chunk[0] + 1 == len(chunk)
        chunks.append(range(chunk[0], chunk[-1] + 1) if contiguous else chunk)
    return chunks


@given(offsets_and_order(), st.lists(st.integers(0, 60), max_size=5))
def test_watermark_never_passes_an_unfinished_record(
    case: tuple[list[int], list[int]], cuts: list[int]
) -> None:
    """After any prefix of completions, the committable offset is <= every unfinished offset,
    and the completed ranges above it cover exactly the finished offsets there."""
    offsets, order = case
    tracker: OffsetTracker[str] = OffsetTracker()
    for chunk in polls(offsets, cuts):
        epoch, skipped = tracker.receive("p", chunk)
        assert skipped == 0
    unfinished = set(offsets)
    last = None
    for index in order:
        epoch.complete([offsets[index]])
        unfinished.discard(offsets[index])
        mark = tracker.committable("p")
        if mark is not None:
            assert all(mark <= offset for offset in unfinished)
            assert last is None or mark > last
            tracker.mark_committed("p", mark)
            last = mark
        assert tracker.in_flight("p") == len(unfinished)
        ranges = tracker.completed_ranges("p")
        covered = {o for o in offsets if any(lo <= o < hi for lo, hi in ranges)}
        assert covered == {o for o in offsets if o >= (last or 0)} - unfinished
        assert all(lo < hi for lo, hi in ranges)
        assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    assert last == offsets[-1] + 1
    assert tracker.committable("p") is None


@given(offsets_and_order(), st.integers(min_value=0, max_value=60))
def test_watermark_is_the_lowest_unfinished_offset(
    case: tuple[list[int], list[int]], done_count: int
) -> None:
    """The committable offset is exactly the lowest unfinished received offset, and what a
    crash would replay counts every received record from there on."""
    offsets, order = case
    tracker: OffsetTracker[str] = OffsetTracker()
    epoch, _ = tracker.receive("p", offsets)
    done = {offsets[i] for i in order[:done_count]}
    epoch.complete(done)
    unfinished = [o for o in offsets if o not in done]
    expected = unfinished[0] if unfinished else offsets[-1] + 1
    assert tracker.committable("p") == expected
    assert tracker.uncommitted("p") == sum(1 for o in offsets if o >= expected)


def test_nothing_received_means_nothing_to_commit() -> None:
    """An unknown partition has no committable offset and nothing in flight."""
    tracker: OffsetTracker[str] = OffsetTracker()
    assert tracker.committable("p") is None
    assert tracker.in_flight("p") == 0
    assert tracker.in_flight() == 0
    assert tracker.completed_ranges("p") == []


def test_committable_reports_only_progress() -> None:
    """After mark_committed, the same watermark is not reported again."""
    tracker: OffsetTracker[str] = OffsetTracker()
    epoch, _ = tracker.receive("p", [7])
    assert tracker.committable("p") == 7
    epoch.complete([7])
    assert tracker.committable("p") == 8
    tracker.mark_committed("p", 8)
    assert tracker.committable("p") is None


def test_completions_of_an_earlier_epoch_are_ignored() -> None:
    """A completion from before forget() does not move the re-assigned partition's watermark."""
    tracker: OffsetTracker[str] = OffsetTracker()
    old, _ = tracker.receive("p", [10])
    tracker.forget("p")
    assert old.forgotten
    new, _ = tracker.receive("p", [10])
    assert new.epoch == old.epoch + 1
    old.complete([10])
    assert tracker.committable("p") == 10
    new.complete([10])
    assert tracker.committable("p") == 11


def test_unknown_and_repeated_completions_are_ignored() -> None:
    """Completing an offset never received, or twice, has no effect."""
    tracker: OffsetTracker[str] = OffsetTracker()
    epoch, _ = tracker.receive("p", [5, 9])
    epoch.complete([7, 10**9])  # a gap, and far past anything received
    assert tracker.committable("p") == 5
    epoch.complete([5, 5])
    assert tracker.in_flight("p") == 1
    assert tracker.committable("p") == 9


def test_redeliveries_are_skipped_and_counted() -> None:
    """Offsets not above the last received one are skipped; the rest is tracked."""
    tracker: OffsetTracker[str] = OffsetTracker()
    tracker.receive("p", range(0, 5))
    epoch, skipped = tracker.receive("p", range(3, 8))
    assert skipped == 2
    assert tracker.in_flight("p") == 8
    assert tracker.receive("p", [1, 2]) == (epoch, 2)


def test_negative_offset_is_rejected() -> None:
    """A negative offset is a ConfigError naming the value."""
    with pytest.raises(ConfigError, match="'offset' must be at least 0"):
        OffsetTracker().receive("p", [-1])


def test_partitions_are_independent() -> None:
    """In-flight counts and watermarks are kept per partition."""
    tracker: OffsetTracker[str] = OffsetTracker()
    ea, _ = tracker.receive("a", [1])
    tracker.receive("b", [1])
    ea.complete([1])
    assert tracker.committable("a") == 2
    assert tracker.committable("b") == 1
    assert tracker.in_flight() == 1
    assert sorted(tracker.partitions()) == ["a", "b"]


def test_uncommitted_counts_from_the_watermark_done_or_not():
    """A stuck record keeps every later record uncommitted, finished or not."""
    tracker = OffsetTracker()
    epoch, _ = tracker.receive("p", range(10))
    epoch.complete(range(1, 10))
    assert tracker.in_flight("p") == 1
    assert tracker.uncommitted("p") == 10
    assert tracker.completed_ranges("p") == [(1, 10)]
    epoch.complete([0])
    assert tracker.uncommitted("p") == 0
    assert tracker.uncommitted("unknown") == 0


def test_a_long_contiguous_run_spans_blocks() -> None:
    """A run over several 4,096-offset blocks is tracked as one, and finished blocks are
    dropped as the watermark passes them."""
    tracker = OffsetTracker()
    epoch, _ = tracker.receive("p", range(4000, 20_000))
    epoch.complete(range(4000, 12_345))
    epoch.complete(range(13_000, 20_000))
    assert tracker.committable("p") == 12_345
    assert tracker.uncommitted("p") == 20_000 - 12_345
    assert tracker.completed_ranges("p") == [(13_000, 20_000)]
    epoch.complete(range(12_345, 13_000))
    assert tracker.committable("p") == 20_000
    assert tracker.in_flight() == 0
