"""Tests of priority_kafka.prefetch: serving fetched records in order, skipping paused ones."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from priority_kafka.prefetch import PrefetchBuffer


class Rec(NamedTuple):
    partition: str
    offset: int


def fetch(partition: str, start: int, count: int) -> dict[str, list[Rec]]:
    return {partition: [Rec(partition, start + i) for i in range(count)]}


def offsets(taken: dict, partition: str) -> list[int]:
    return [r.offset for r in taken.get(partition, [])]


def test_take_serves_oldest_first_up_to_the_limit() -> None:
    """Records come out in fetch order; a partial take leaves the rest in front."""
    buffer = PrefetchBuffer()
    buffer.extend({**fetch("a", 0, 3), **fetch("b", 10, 3)})
    assert len(buffer) == 6
    first = buffer.take(4)
    assert offsets(first, "a") == [0, 1, 2] and offsets(first, "b") == [10]
    assert len(buffer) == 2
    assert offsets(buffer.take(10), "b") == [11, 12]
    assert len(buffer) == 0 and buffer.take(5) == {}


def test_paused_partitions_are_skipped_and_keep_their_place() -> None:
    """take() skips paused partitions; they are served, still in order, once not paused."""
    buffer = PrefetchBuffer()
    buffer.extend(fetch("a", 0, 2))
    buffer.extend(fetch("b", 0, 2))
    buffer.extend(fetch("a", 2, 2))
    assert buffer.available({"a"}) == 2
    assert list(buffer.take(10, paused={"a"})) == ["b"]
    assert offsets(buffer.take(10), "a") == [0, 1, 2, 3]


def test_unread_puts_records_back_in_front() -> None:
    """Records put back are served again before anything fetched after them."""
    buffer = PrefetchBuffer()
    buffer.extend(fetch("a", 0, 5))
    taken = buffer.take(3)
    buffer.unread(taken)
    assert offsets(buffer.take(5), "a") == [0, 1, 2, 3, 4]


def test_drop_returns_the_first_offset_dropped_per_partition() -> None:
    """drop() forgets a partition's records and says where they started; others stay."""
    buffer = PrefetchBuffer()
    buffer.extend({**fetch("a", 0, 4), **fetch("b", 7, 2)})
    buffer.take(1)
    assert buffer.first_offsets() == {"a": 1, "b": 7}
    assert buffer.drop({"a", "c"}) == {"a": 1}
    assert len(buffer) == 2 and buffer.partitions() == {"b"}
    assert buffer.drop(buffer.partitions()) == {"b": 7}
    assert len(buffer) == 0


def test_a_negative_limit_is_refused() -> None:
    """take() names a bad limit."""
    with pytest.raises(ValueError, match="'limit' must be >= 0 \\(got -1\\)"):
        PrefetchBuffer().take(-1)


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 20)), max_size=20),
    st.lists(st.tuples(st.integers(0, 30), st.sets(st.sampled_from("abc"))), max_size=20),
)
def test_every_partition_comes_out_complete_and_in_order(
    fetches: list[tuple[str, int]], takes: list[tuple[int, set[str]]]
) -> None:
    """Whatever the takes, pauses and put-backs, each partition comes out once, in order."""
    buffer = PrefetchBuffer()
    next_offset = {"a": 0, "b": 0, "c": 0}
    for partition, count in fetches:
        buffer.extend(fetch(partition, next_offset[partition], count))
        next_offset[partition] += count
    served: dict[str, list[int]] = {"a": [], "b": [], "c": []}
    for index, (limit, paused) in enumerate(takes):
        available = buffer.available(paused)
        taken = buffer.take(limit, paused)
        assert sum(map(len, taken.values())) == min(limit, available)
        assert not set(taken) & paused
        if index % 3 == 2:
            buffer.unread(taken)  # a failed poll puts its records back
            continue
        for partition, records in taken.items():
            served[partition] += [r.offset for r in records]
    for partition, records in buffer.take(len(buffer)).items():
        served[partition] += [r.offset for r in records]
    assert served == {p: list(range(n)) for p, n in next_offset.items()}
    assert len(buffer) == 0


class Sized(NamedTuple):
    partition: str
    offset: int
    value: bytes
    key: bytes | None = None


def test_the_buffer_counts_its_bytes_and_the_size_of_the_records_last_fetched() -> None:
    """Keys and values of the unserved records (a partly served run pro rata), and the mean
    size of the last fetch, which a level uses to fetch no more than fits its share."""
    buffer: PrefetchBuffer[str] = PrefetchBuffer()
    assert buffer.bytes() == 0 and buffer.record_size == 0
    buffer.extend({"a": [Sized("a", i, b"x" * 100, b"k") for i in range(10)]})
    assert buffer.bytes() == 1010 and buffer.record_size == 101
    buffer.extend({"b": [Sized("b", i, b"y" * 1000) for i in range(2)]})
    assert buffer.bytes() == 3010 and buffer.record_size == 1000
    buffer.take(4)
    assert buffer.bytes() == 606 + 2000
    buffer.drop(["b"])
    assert buffer.bytes() == 606
    buffer.take(6)
    assert buffer.bytes() == 0
