"""Tests of priority_kafka.sharding: ordering modes and lane ids."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from priority_kafka.errors import ConfigError
from priority_kafka.sharding import ORDERINGS, check_ordering, lane_of, stable_hash


@given(st.binary(), st.integers(0, 10), st.integers(0, 10**9), st.integers(0, 10**9))
def test_same_key_same_partition_same_lane(key: bytes, partition: int, a: int, b: int) -> None:
    """In key mode, records with the same key in the same partition share a lane."""
    assert lane_of("t", partition, key, a, "key") == lane_of("t", partition, key, b, "key")


@given(st.integers(0, 10), st.integers(0, 10**9), st.integers(0, 10**9))
def test_keyless_records_share_the_partition_lane(partition: int, a: int, b: int) -> None:
    """In key mode, records without a key are ordered per partition."""
    assert lane_of("t", partition, None, a, "key") == lane_of("t", partition, None, b, "key")
    assert lane_of("t", partition, None, a, "key") != lane_of("t", partition + 1, None, a, "key")


@given(st.binary(), st.binary(), st.integers(0, 10**9), st.integers(0, 10**9))
def test_partition_mode_ignores_keys(k1: bytes, k2: bytes, a: int, b: int) -> None:
    """In partition mode, every record of a partition shares one lane."""
    assert lane_of("t", 3, k1, a, "partition") == lane_of("t", 3, k2, b, "partition")


@given(st.binary(), st.integers(0, 10**9), st.integers(0, 10**9))
def test_unordered_mode_gives_each_record_its_own_lane(key: bytes, a: int, b: int) -> None:
    """In unordered mode, distinct offsets never share a lane, nor meet a key lane."""
    if a != b:
        assert lane_of("t", 0, key, a, "unordered") != lane_of("t", 0, key, b, "unordered")
    assert lane_of("t", 0, key, a, "unordered") != lane_of("t", 0, key, a, "key")


def test_different_keys_spread_over_lanes() -> None:
    """Distinct keys land in distinct lanes (no collisions among 10,000 small keys)."""
    lanes = {lane_of("t", 0, str(i).encode(), i, "key") for i in range(10_000)}
    assert len(lanes) == 10_000


def test_stable_hash_is_the_same_in_another_process() -> None:
    """The hash does not depend on the process (unlike the salted built-in hash())."""
    code = "from priority_kafka.sharding import stable_hash; print(stable_hash(b'order-42'))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONHASHSEED": "random"},
    )
    assert int(out.stdout) == stable_hash(b"order-42")


@pytest.mark.parametrize("mode", ORDERINGS)
def test_every_ordering_is_accepted(mode: str) -> None:
    """The three documented modes pass the check unchanged."""
    assert check_ordering(mode) == mode


def test_bad_ordering_names_the_choices() -> None:
    """An unknown mode is a ConfigError listing the valid ones."""
    with pytest.raises(ConfigError, match="'ordering' must be one of key, partition, unordered"):
        check_ordering("keyed")

