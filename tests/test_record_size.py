"""Tests of priority_kafka.record_size: the bytes of records' keys and values as stored."""

from __future__ import annotations

from typing import Any, NamedTuple

from kafka.consumer.fetcher import ConsumerRecord

from priority_kafka.record_size import SAMPLES, record_bytes, sampled_bytes


class Plain(NamedTuple):
    offset: int
    key: Any
    value: Any


def stored(offset: int, key: bytes | None, value: bytes | None) -> ConsumerRecord:
    sizes = [-1 if part is None else len(part) for part in (key, value)]
    return ConsumerRecord("t", 0, -1, offset, 0, 0, key, value, [], None, *sizes, -1)


def test_kafka_python_records_count_their_serialized_sizes() -> None:
    """kafka-python's size fields are summed (a missing key or value is its -1)."""
    assert record_bytes([stored(i, b"k", b"v" * 10) for i in range(3)]) == 33
    assert record_bytes([stored(0, None, b"v" * 10), stored(1, b"kk", None)]) == 10
    assert record_bytes([stored(0, None, None)]) == 0
    assert record_bytes([]) == 0


def test_a_sample_gives_the_bytes_of_even_records_and_about_those_of_mixed_ones() -> None:
    """At most SAMPLES records are read; records of one size are counted exactly, and few
    records are all read."""
    even = [stored(i, b"k", b"v" * 99) for i in range(1000)]
    assert sampled_bytes(even) == 100_000
    few = [stored(i, None, b"v" * i) for i in range(1, SAMPLES + 1)]
    assert sampled_bytes(few) == record_bytes(few)
    mixed = [stored(i, None, b"v" * (10 if i % 2 else 1000)) for i in range(1000)]
    # 4 records of 1,000 B and 4 of 10 B sampled, their missing keys -1 each: the mean, 504 B
    assert sampled_bytes(mixed) == 504_000


def test_other_records_count_a_bytes_or_str_key_and_value() -> None:
    """Records without the size fields (a test's, an undeserializable one) count what they
    hold as bytes or text; anything else (a deserialized object) counts 0."""
    assert record_bytes([Plain(0, b"ab", "cde"), Plain(1, None, None)]) == 5
    assert record_bytes([Plain(0, 7, {"a": 1})]) == 0
