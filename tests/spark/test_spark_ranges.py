"""Tests for priority_kafka.spark.ranges: offsets JSON, offset ranges, apportioning, splitting."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from priority_kafka.errors import ConfigError
from priority_kafka.spark.ranges import (
    OffsetRange,
    apportion,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    split_ranges,
)

pytestmark = pytest.mark.spark

keys = st.tuples(st.sampled_from(["a-0", "a-1", "b-2", "orders-10"]), st.integers(0, 50))
offset_maps = st.dictionaries(keys, st.integers(0, 10**12), max_size=12)


@given(offset_maps)
def test_offsets_json_round_trips(offsets):
    """Offsets survive the JSON form Spark checkpoints, through real JSON text."""
    assert offsets_from_json(json.loads(json.dumps(offsets_to_json(offsets)))) == offsets


@given(offset_maps)
def test_offsets_json_text_does_not_depend_on_insertion_order(offsets):
    """Equal offsets give equal JSON text, because Spark compares offsets as text."""
    reordered = dict(reversed(list(offsets.items())))
    assert json.dumps(offsets_to_json(offsets)) == json.dumps(offsets_to_json(reordered))


def test_offsets_json_uses_spark_kafka_layout():
    """The layout is Spark's Kafka one: topic -> partition (string) -> offset."""
    assert offsets_to_json({("orders-2", 1): 7, ("orders-2", 0): 42}) == {
        "orders-2": {"0": 42, "1": 7}
    }


def test_offsets_from_malformed_json_is_a_config_error():
    """A document of the wrong shape names the expected layout."""
    with pytest.raises(ConfigError, match="must look like"):
        offsets_from_json({"orders-2": {"zero": 1}})


def test_offset_range_knows_its_priority_and_size():
    """A range's priority comes from its topic's level suffix."""
    offset_range = OffsetRange("orders-2", 0, 10, 25)
    assert (offset_range.priority, offset_range.size) == (2, 15)


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=10), st.data())
def test_apportion_sums_to_total_and_respects_each_weight(weights, data):
    """Shares sum to the total, never exceed their weight, and stay within 1 of proportional."""
    total = data.draw(st.integers(0, sum(weights)))
    shares = apportion(total, weights)
    assert sum(shares) == total
    whole = sum(weights)
    for share, weight in zip(shares, weights, strict=True):
        assert 0 <= share <= weight
        if whole:
            assert abs(share - total * weight / whole) < 1


def test_apportion_splits_by_weight():
    """50 over backlogs 100/300 is 12.5/37.5: the larger remainder ties go to the first."""
    assert apportion(50, [100, 300]) == [13, 37]


def test_apportion_rejects_a_total_above_the_weights():
    """Asking for more than the weights hold is a ConfigError naming both."""
    with pytest.raises(ConfigError, match="'total' must be between 0"):
        apportion(5, [1, 2])


def test_plan_ranges_skips_empty_partitions_and_orders_by_priority():
    """Only partitions with offsets to read become ranges, highest priority first."""
    start = {("t-0", 0): 5, ("t-2", 0): 1, ("t-1", 0): 3}
    end = {("t-0", 0): 9, ("t-2", 0): 4, ("t-1", 0): 3, ("t-1", 1): 2}
    assert plan_ranges(start, end) == [
        OffsetRange("t-2", 0, 1, 4),
        OffsetRange("t-1", 1, 0, 2),
        OffsetRange("t-0", 0, 5, 9),
    ]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 5000)), min_size=1, max_size=6),
    st.integers(1, 40),
)
def test_split_ranges_covers_every_offset_exactly_once(spans, min_partitions):
    """Split pieces tile each original range without gaps or overlap."""
    ranges = [OffsetRange("t-1", i, start, start + size) for i, (start, size) in enumerate(spans)]
    pieces = split_ranges(ranges, min_partitions)
    for original in ranges:
        mine = sorted((p.start, p.end) for p in pieces if p.partition == original.partition)
        assert mine[0][0] == original.start and mine[-1][1] == original.end
        assert all(a[1] == b[0] for a, b in pairwise(mine))
        assert all(end > start for start, end in mine)


def test_split_ranges_reaches_min_partitions_in_proportion_to_size():
    """A range three times larger gets three times the pieces, as in Spark's Kafka source."""
    ranges = [OffsetRange("t-0", 0, 0, 300), OffsetRange("t-1", 0, 0, 100)]
    pieces = split_ranges(ranges, 4)
    assert [(p.topic, p.size) for p in pieces] == [
        ("t-0", 100), ("t-0", 100), ("t-0", 100), ("t-1", 100)
    ]


def test_split_ranges_leaves_enough_ranges_alone():
    """With at least minPartitions ranges already (or no option), nothing is split."""
    ranges = [OffsetRange("t-0", 0, 0, 300), OffsetRange("t-1", 0, 0, 100)]
    assert split_ranges(ranges, 2) == ranges
    assert split_ranges(ranges, None) == ranges
