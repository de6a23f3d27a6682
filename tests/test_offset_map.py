"""Tests for priority_kafka.offset_map: completed offsets carried in commit metadata."""

from __future__ import annotations

import base64
import random
import subprocess
import sys
import zlib

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from priority_kafka.errors import ConfigError
from priority_kafka.offset_map import (
    DEFAULT_MAX_BYTES,
    OffsetMap,
    _ranges,
    _varint,
    decode_offset_map,
    encode_offset_map,
    encode_offset_ranges,
)

watermarks = st.integers(min_value=0, max_value=2**62)
# No per-case deadline: cases encode thousands of offsets, and the machines running the suite
# are shared; the sizes are bounded by the strategies instead.
PROPERTY = settings(deadline=None)


@st.composite
def completed_maps(draw, max_gap=50):
    """A watermark and a set of completed offsets above it: runs and gaps of varied sizes."""
    watermark = draw(watermarks)
    offsets = set()
    position = watermark
    for gap, run in draw(st.lists(st.tuples(
        st.integers(1, max_gap), st.integers(1, max_gap)
    ), max_size=40)):
        offsets.update(range(position + gap, position + gap + run))
        position += gap + run
    return watermark, offsets


def decoded(metadata, watermark):
    """The offsets the metadata carries for ``watermark``, failing on a refused map."""
    result = decode_offset_map(metadata, watermark)
    assert result.problem is None
    return set(result.map)


@PROPERTY
@given(completed_maps())
@example((0, {1}))
@example((5, set(range(6, 10_006))))
def test_a_map_that_fits_decodes_to_the_same_offsets(case):
    """Every completed offset comes back, and nothing else."""
    watermark, offsets = case
    encoded = encode_offset_map(watermark, offsets)
    assert (encoded.encoded, encoded.total, encoded.truncated) == (len(offsets), len(offsets),
                                                                   False)
    assert decoded(encoded.metadata, watermark) == offsets
    assert all(offset in decode_offset_map(encoded.metadata, watermark).map for offset in offsets)


@PROPERTY
@given(completed_maps(max_gap=300), st.integers(0, 300))
def test_metadata_never_exceeds_max_bytes_and_keeps_the_lowest_offsets(case, max_bytes):
    """Under any size bound the metadata fits, and it carries exactly the lowest offsets
    (a prefix of the sorted map): what it leaves out is only replayed, never lost."""
    watermark, offsets = case
    encoded = encode_offset_map(watermark, offsets, max_bytes=max_bytes)
    assert len(encoded.metadata) <= max_bytes
    assert decoded(encoded.metadata, watermark) == set(sorted(offsets)[:encoded.encoded])
    assert encoded.truncated == (encoded.encoded < len(offsets))


@PROPERTY
@given(completed_maps(max_gap=300), st.integers(0, 400))
def test_ranges_encode_as_their_offsets_and_say_what_they_carry(case, max_bytes):
    """Ranges give the metadata their offsets give, and ``ranges`` is exactly what the
    metadata carries (what a commit covers above its watermark)."""
    watermark, offsets = case
    ranges = _ranges(sorted(offsets)) if offsets else []
    by_ranges = encode_offset_ranges(watermark, ranges, max_bytes=max_bytes)
    assert by_ranges.metadata == encode_offset_map(watermark, offsets, max_bytes).metadata
    carried = {o for start, stop in by_ranges.ranges for o in range(start, stop)}
    assert carried == set(sorted(offsets)[:by_ranges.encoded])
    if by_ranges.metadata:
        assert decoded(by_ranges.metadata, watermark) == carried


def test_adjacent_ranges_are_one_run():
    """Ranges that touch (as a tracker's blocks may give them) encode as one run."""
    assert (encode_offset_ranges(10, [(12, 15), (15, 20)]).metadata
            == encode_offset_ranges(10, [(12, 20)]).metadata)
    assert encode_offset_ranges(10, [(12, 15), (15, 20)]).ranges == ((12, 20),)


@pytest.mark.parametrize(("ranges", "message"), [
    ([(10, 12)], "'range start' must be at least 11 (got 10)"),
    ([(12, 12)], "'range stop' must be at least 13 (got 12)"),
    ([(12, 15), (14, 20)], "'range start' must be at least 15 (got 14)"),
])
def test_ranges_out_of_order_or_empty_are_refused(ranges, message):
    """Ranges must be sorted, disjoint, non-empty and above the watermark."""
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        encode_offset_ranges(10, ranges)


def test_a_truncated_map_keeps_most_of_what_fits():
    """A map too large for 4096 bytes (random completions over 200,000 offsets) still fills
    most of the bound: the commit carries as much as fits instead of nothing."""
    rng = random.Random(7)
    offsets = {o for o in range(1, 200_000) if rng.random() < 0.5}
    encoded = encode_offset_map(0, offsets)
    assert encoded.truncated
    assert DEFAULT_MAX_BYTES * 0.9 < len(encoded.metadata) <= DEFAULT_MAX_BYTES
    assert decoded(encoded.metadata, 0) == set(sorted(offsets)[:encoded.encoded])


@pytest.mark.parametrize(("name", "offsets", "at_most"), [
    ("one contiguous run of 10,000", range(1_001, 11_001), 40),
    ("every other offset of 2,000", range(1_001, 3_001, 2), 60),
    ("every 16th shard's records done of 1,600", [o for o in range(1_001, 2_601) if o % 16], 60),
    ("random half of 4,000", None, 800),
])
def test_typical_maps_are_small(name, offsets, at_most):
    """The densest encoding keeps typical maps far below the 4 KB bound."""
    if offsets is None:
        rng = random.Random(3)
        offsets = [o for o in range(1_001, 5_001) if rng.random() < 0.5]
    encoded = encode_offset_map(1_000, offsets)
    assert not encoded.truncated
    assert len(encoded.metadata) <= at_most, (name, len(encoded.metadata))


def test_nothing_completed_commits_empty_metadata():
    """Without completed offsets the metadata is empty, as a commit without a map."""
    assert encode_offset_map(10, []).metadata == ""
    assert encode_offset_map(10, [11], max_bytes=0).metadata == ""


@pytest.mark.parametrize("metadata", ["", None])
def test_empty_metadata_is_an_empty_map_without_a_problem(metadata):
    """Groups committed without metadata (older releases, Spark, other tools) keep working."""
    result = decode_offset_map(metadata, 42)
    assert result.problem is None
    assert result.map == OffsetMap(42, 42)
    assert len(result.map) == 0 and 43 not in result.map


def test_a_map_for_another_committed_offset_is_refused():
    """A map is only valid for the offset it was committed with (an offset reset keeps
    nothing of it)."""
    metadata = encode_offset_map(100, [102, 103]).metadata
    result = decode_offset_map(metadata, 90)
    assert result.problem is not None and "written for offset 100" in result.problem
    assert len(result.map) == 0 and result.map.watermark == 90


@pytest.mark.parametrize(("metadata", "reason"), [
    ("some other tool's note", "not a priority_kafka offset map"),
    ("pkmap2:AAAA", "version of the offset map this release cannot read"),
    ("pkmap1:!!!!", "not valid base64"),
    ("pkmap1:" + base64.b64encode(b"\x01\x00\x00").decode(), "too short"),
    ("pkmap1:" + base64.b64encode(b"\x81\x00\x00\x00\x00" + zlib.compress(b"\x00" * (2 << 20)))
     .decode(), "inflates past"),
    ("pkmap1:" + base64.b64encode(b"\x09" + zlib.crc32(b"\x00\x01").to_bytes(4, "big")
                                  + b"\x00\x01").decode(), "encoding 9 is unknown"),
])
def test_foreign_or_broken_metadata_is_refused_with_the_reason(metadata, reason):
    """Metadata that is no map of ours is an empty map and a problem saying why."""
    result = decode_offset_map(metadata, 0)
    assert result.problem is not None and reason in result.problem
    assert len(result.map) == 0


@PROPERTY
@given(st.text(max_size=200) | st.text(max_size=200).map("pkmap1:".__add__)
       | st.binary(max_size=200).map(lambda b: "pkmap1:" + base64.b64encode(b).decode()),
       watermarks)
def test_garbage_never_raises(metadata, committed):
    """Any text decodes to a map or to a refusal, never to an exception."""
    result = decode_offset_map(metadata, committed)
    assert (result.problem is None) or len(result.map) == 0


@PROPERTY
@given(completed_maps(), st.data())
def test_an_altered_map_is_refused_or_unchanged(case, data):
    """Changing one character of a map is caught (base64, checksum, structure) or leaves the
    same map (base64's unused trailing bits): it never yields other offsets."""
    watermark, offsets = case
    metadata = encode_offset_map(watermark, offsets | {watermark + 1}).metadata
    index = data.draw(st.integers(len("pkmap1:"), len(metadata) - 1))
    replacement = data.draw(st.sampled_from(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    ))
    altered = metadata[:index] + replacement + metadata[index + 1:]
    result = decode_offset_map(altered, watermark)
    assert result.problem is not None or set(result.map) == offsets | {watermark + 1}


@pytest.mark.parametrize(("call", "message"), [
    (lambda: encode_offset_map(-1, []), "'watermark' must be at least 0 (got -1)"),
    (lambda: encode_offset_map(5, [5]), "'completed offset' must be at least 6 (got 5)"),
    (lambda: encode_offset_map(5, ["7"]), "'completed offset' must be an int (got '7')"),
    (lambda: encode_offset_map(5, [7], max_bytes=-1), "'max_bytes' must be at least 0"),
    (lambda: decode_offset_map("", True), "'committed' must be an int (got True)"),
])
def test_bad_arguments_name_the_value(call, message):
    """A caller's mistake (not the metadata read) raises ConfigError naming the value."""
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


@PROPERTY
@given(st.sampled_from([1, 2, 3, 4]), st.booleans(), st.binary(max_size=60), watermarks)
def test_bodies_with_a_valid_checksum_parse_safely(encoding, compress, tail, committed):
    """Whatever a body holds behind a correct checksum (a hostile writer can compute one), it
    is refused or read as offsets above the committed one within the span it declares."""
    body = _varint(committed) + tail
    data = zlib.compress(body) if compress else body
    payload = bytes([encoding | (0x80 if compress else 0)]) + zlib.crc32(body).to_bytes(4, "big")
    result = decode_offset_map("pkmap1:" + base64.b64encode(payload + data).decode(), committed)
    if result.problem is None:
        assert all(committed < start < stop <= result.map.end for start, stop in result.map.ranges)



def test_the_nul_librdkafka_adds_to_metadata_is_read_as_its_end():
    """confluent-kafka commits metadata with its C string's terminator; the map still reads."""
    metadata = encode_offset_map(100, [102, 103]).metadata
    assert decoded(metadata + "\x00", 100) == {102, 103}
    assert decode_offset_map("\x00", 100) == decode_offset_map("", 100)


@PROPERTY
@given(st.lists(st.integers(0, 2**64 - 1), max_size=50))
def test_varints_of_an_array_are_the_varints_of_each_value(values):
    """The vectorised encoder writes each number as the scalar one does."""
    import numpy as np

    from priority_kafka.offset_map import _varints

    assert _varints(np.array(values, dtype=np.uint64)) == b"".join(map(_varint, values))


def test_a_map_reaching_the_largest_offset_encodes():
    """Ranges ending at 2**63 (past the largest offset) fit the unsigned arrays."""
    watermark = 2**63 - 10
    encoded = encode_offset_ranges(watermark, [(2**63 - 8, 2**63 - 5), (2**63 - 3, 2**63)])
    assert decoded(encoded.metadata, watermark) == {2**63 - 8, 2**63 - 7, 2**63 - 6,
                                                    2**63 - 3, 2**63 - 2, 2**63 - 1}


@st.composite
def range_lists(draw):
    """A watermark and sorted, disjoint, not adjacent ranges above it: up to 200 of them,
    past the size where numpy takes over the coding."""
    watermark = draw(watermarks)
    ranges, position = [], watermark
    for gap, run in draw(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40)),
                                  min_size=1, max_size=200)):
        ranges.append((position + gap, position + gap + run))
        position += gap + run
    return watermark, ranges


@PROPERTY
@given(range_lists())
def test_plain_python_and_numpy_write_the_same_bodies(case):
    """Short maps are coded in plain Python and long ones with numpy: byte for byte the same."""
    from priority_kafka.offset_map import _bodies, _bodies_numpy

    watermark, ranges = case
    count = sum(stop - start for start, stop in ranges)
    span = ranges[-1][1] - watermark
    header = _varint(watermark) + _varint(span)
    assert (_bodies(watermark, ranges, count, span, header)
            == _bodies_numpy(watermark, ranges, count, span, header))


@PROPERTY
@given(st.binary(min_size=1, max_size=300), st.integers(0, 7), watermarks)
def test_plain_python_and_numpy_read_the_same_bitsets(data, short, watermark):
    """A bitset reads as the same ranges, or is refused for the same reason, either way."""
    from priority_kafka.offset_map import _bitset_ranges, _bitset_ranges_numpy, _Refused

    span = 8 * len(data) - short
    outcomes = []
    for read in (_bitset_ranges, _bitset_ranges_numpy):
        try:
            outcomes.append(read(data, watermark, span))
        except _Refused as refused:
            outcomes.append(str(refused))
    assert outcomes[0] == outcomes[1]


def test_an_executor_with_small_maps_never_imports_numpy():
    """numpy (15 MB of a process's memory) is imported only when a map needs it: not by the
    executor or either client's adapter, nor by coding a map of a few ranges."""
    code = (
        "import sys\n"
        "import priority_kafka.executor, priority_kafka.confluent.executor\n"
        "from priority_kafka.offset_map import decode_offset_map, encode_offset_ranges\n"
        "small = encode_offset_ranges(10, [(12, 14), (20, 21)])\n"
        "assert set(decode_offset_map(small.metadata, 10).map) == {12, 13, 20}\n"
        "assert 'numpy' not in sys.modules, 'numpy imported'\n"
        "large = encode_offset_ranges(10, [(12 + 3 * i, 13 + 3 * i) for i in range(500)])\n"
        "assert 'numpy' in sys.modules\n"
        "assert len(decode_offset_map(large.metadata, 10).map) == 500\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
