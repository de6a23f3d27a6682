"""Completed offsets above a committed watermark, carried in the commit's metadata.

The executor commits each partition's watermark (the lowest offset not yet done), so records
that finished above it are handled again after a crash or a handoff. Kafka stores a string of
metadata with every committed offset; this module packs the completed offsets above the
watermark into that string, so the next owner can skip them (Confluent's parallel-consumer
does the same). The committed offset itself stays the watermark: a reader that ignores the
metadata loses nothing, it only replays more.

:func:`encode_offset_map` picks the densest of three encodings, each raw or zlib-compressed:

* ``RUNS``: alternating lengths of not-completed and completed runs, from the watermark;
* ``BITSET``: one bit per offset from the watermark (little-endian bit order);
* ``DELTAS``: the count of completed offsets, then the gap before each.

and never exceeds ``max_bytes`` (the broker's ``offset.metadata.max.bytes``, 4096 by default,
which refuses the whole commit when exceeded): when the map would not fit it encodes the
largest prefix that does, lowest offsets first, so the commit always goes through and only
the offsets left out are replayed.

:func:`decode_offset_map` never raises on what it reads: empty metadata (a group committed
without a map, or by another tool) is an empty map, and anything else that is not a valid map
for the committed offset (another library's metadata, a newer format, corrupt or hostile
text) is an empty map plus a ``problem`` naming why, for the caller to log and ignore. One
trailing NUL is read as the end of the text: librdkafka commits metadata with it (and counts
it against ``offset.metadata.max.bytes``).

Format, version 1: ``pkmap1:`` then standard base64 of one kind byte (the encoding in the low
bits, ``0x80`` when the body is zlib-compressed), the CRC-32 of the uncompressed body (4 bytes,
big-endian) and the body: the watermark and the span the map covers (unsigned LEB128 varints),
then the encoding's data. Offsets at or past ``watermark + span`` are not claimed.

Pure: no Kafka, threads or clocks. The common map (a few dozen ranges) is coded in plain
Python; numpy, imported only when a map first needs it, codes the long ones (thousands of
ranges at every commit, several times over when cut to fit): an executor whose maps stay small
does not pay numpy's 15 MB of memory.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING

import attrs

from priority_kafka._checks import check_int, shown

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DecodedOffsetMap",
    "EncodedOffsetMap",
    "OffsetMap",
    "decode_offset_map",
    "encode_offset_map",
    "encode_offset_ranges",
]

#: The broker's default ``offset.metadata.max.bytes``: longer metadata fails the commit.
DEFAULT_MAX_BYTES = 4096
#: The most ``max_bytes`` may be, and the longest metadata the decoder reads: far above any
#: broker setting seen in practice, small enough that a hostile map costs little to reject.
MAX_METADATA_BYTES = 1 << 20
#: The most bytes a compressed body may inflate to (a zlib bomb is refused at this size); a
#: bitset this large covers 8 million offsets, far more than a partition has in flight.
_MAX_BODY_BYTES = 1 << 20
_MAX_OFFSET = 2**63 - 1  # offsets are Java longs
_PREFIX = "pkmap1:"
_FAMILY = "pkmap"
_RUNS, _BITSET, _DELTAS = 1, 2, 3
_COMPRESSED = 0x80
#: Maps of up to this many ranges (and bitsets of up to this many bytes) are coded in plain
#: Python, longer ones with numpy: the same bytes either way, by test.
_SMALL = 64


@attrs.frozen
class OffsetMap:
    """Completed offsets above a committed ``watermark``, as sorted half-open ``ranges``.

    Covers ``[watermark, end)``: offsets in a range are done, other offsets below ``end`` are
    not, and offsets at or past ``end`` are unknown (not done, as far as the map says).
    """

    watermark: int
    end: int
    ranges: tuple[tuple[int, int], ...] = ()

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int):
            return False
        index = bisect_right(self.ranges, (offset, _MAX_OFFSET + 1)) - 1
        return index >= 0 and self.ranges[index][0] <= offset < self.ranges[index][1]

    def __len__(self) -> int:
        return sum(stop - start for start, stop in self.ranges)

    def __iter__(self) -> Iterator[int]:
        for start, stop in self.ranges:
            yield from range(start, stop)


@attrs.frozen
class EncodedOffsetMap:
    """What :func:`encode_offset_map` made: the ``metadata`` to commit with the watermark."""

    #: The commit metadata: ``""`` when there is nothing to carry (or nothing fits).
    metadata: str
    #: How many completed offsets the metadata carries: the lowest ``encoded`` of ``total``.
    encoded: int
    #: How many completed offsets above the watermark were given.
    total: int
    #: The completed offsets the metadata carries, as sorted half-open ranges: what a reader
    #: of this commit skips (the lowest ``encoded`` offsets given).
    ranges: tuple[tuple[int, int], ...] = ()

    @property
    def truncated(self) -> bool:
        """True when the map did not fit whole and only its lowest offsets were encoded."""
        return self.encoded < self.total


@attrs.frozen
class DecodedOffsetMap:
    """What :func:`decode_offset_map` read: the ``map`` and, when it was refused, why."""

    #: The completed offsets: empty when the metadata carried none or was refused.
    map: OffsetMap
    #: None when the metadata was a valid map or empty; otherwise why it was ignored.
    problem: str | None = None


def encode_offset_map(
    watermark: int, completed: Iterable[int], max_bytes: int = DEFAULT_MAX_BYTES
) -> EncodedOffsetMap:
    """Encode the ``completed`` offsets above ``watermark`` in at most ``max_bytes`` characters.

    ``watermark`` is the offset being committed (the lowest one not done), so every completed
    offset must be above it. When the whole map does not fit, the largest prefix that fits is
    encoded (lowest offsets first); the result says how many offsets it carries.
    """
    watermark = check_int("watermark", watermark, minimum=0, maximum=_MAX_OFFSET)
    max_bytes = check_int("max_bytes", max_bytes, minimum=0, maximum=MAX_METADATA_BYTES)
    offsets = sorted({
        check_int("completed offset", offset, minimum=watermark + 1, maximum=_MAX_OFFSET)
        for offset in completed
    })
    return _encode_fitting(watermark, _ranges(offsets) if offsets else [], max_bytes)


def encode_offset_ranges(
    watermark: int, ranges: Sequence[tuple[int, int]], max_bytes: int = DEFAULT_MAX_BYTES
) -> EncodedOffsetMap:
    """:func:`encode_offset_map` for completed offsets given as sorted, disjoint, half-open
    ``(start, stop)`` ranges above ``watermark`` (what the executor's tracker keeps), without
    expanding them into offsets. The metadata is the same as for the offsets they hold."""
    watermark = check_int("watermark", watermark, minimum=0, maximum=_MAX_OFFSET)
    max_bytes = check_int("max_bytes", max_bytes, minimum=0, maximum=MAX_METADATA_BYTES)
    merged: list[tuple[int, int]] = []
    floor = watermark + 1
    for start, stop in ranges:
        # The checks inline (a commit may carry thousands of ranges); check_int says what
        # is wrong.
        if not (type(start) is int and type(stop) is int
                and floor <= start < stop <= _MAX_OFFSET + 1):
            check_int("range start", start, minimum=floor, maximum=_MAX_OFFSET)
            check_int("range stop", stop, minimum=start + 1, maximum=_MAX_OFFSET + 1)
        if merged and merged[-1][1] == start:  # adjacent ranges are one run
            merged[-1] = (merged[-1][0], stop)
        else:
            merged.append((start, stop))
        floor = stop
    return _encode_fitting(watermark, merged, max_bytes)


def _encode_fitting(
    watermark: int, ranges: list[tuple[int, int]], max_bytes: int
) -> EncodedOffsetMap:
    """The metadata for ``ranges`` (sorted, disjoint, not adjacent, above ``watermark``), or
    for the longest prefix of their offsets that fits ``max_bytes``."""
    if not ranges:
        return EncodedOffsetMap("", 0, 0)
    counts = list(accumulate(stop - start for start, stop in ranges))
    total = counts[-1]
    metadata = _encode(watermark, ranges, total)
    if len(metadata) <= max_bytes:
        return EncodedOffsetMap(metadata, total, total, tuple(ranges))
    # Binary search for the longest prefix that fits: fits(0) (empty metadata) always holds,
    # fits(total) does not. Compression makes the size only almost monotonic in the prefix,
    # so this finds a prefix that fits, near the longest one.
    fitting, fitting_count, too_long = "", 0, total
    fitting_ranges: list[tuple[int, int]] = []
    while too_long - fitting_count > 1:
        middle = (fitting_count + too_long) // 2
        prefix = _prefix(ranges, counts, middle)
        candidate = _encode(watermark, prefix, middle)
        if len(candidate) <= max_bytes:
            fitting, fitting_count, fitting_ranges = candidate, middle, prefix
        else:
            too_long = middle
    return EncodedOffsetMap(fitting, fitting_count, total, tuple(fitting_ranges))


def _prefix(
    ranges: list[tuple[int, int]], counts: list[int], count: int
) -> list[tuple[int, int]]:
    """The ranges holding the lowest ``count`` offsets (``counts``: running totals)."""
    index = bisect_right(counts, count - 1)  # the range holding the count-th offset
    before = counts[index - 1] if index else 0
    start = ranges[index][0]
    return [*ranges[:index], (start, start + count - before)]


def decode_offset_map(metadata: object, committed: int) -> DecodedOffsetMap:
    """Read the map in a commit's ``metadata`` for the ``committed`` offset; never raises on
    the metadata (see the module docstring), only on a ``committed`` that is no offset."""
    committed = check_int("committed", committed, minimum=0, maximum=_MAX_OFFSET)
    empty = OffsetMap(committed, committed)
    if isinstance(metadata, str) and metadata.endswith("\x00"):
        # librdkafka (confluent-kafka) commits its C string's terminator with the metadata.
        metadata = metadata[:-1]
    if metadata is None or metadata == "":
        return DecodedOffsetMap(empty)
    try:
        return DecodedOffsetMap(_decode(metadata, committed))
    except _Refused as refused:
        return DecodedOffsetMap(empty, f"ignored the commit metadata {shown(metadata)}: {refused}")


class _Refused(Exception):
    """The metadata is no valid offset map for the committed offset; the message says why."""


def _ranges(offsets: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct ``offsets`` as half-open ranges of consecutive offsets."""
    ranges: list[tuple[int, int]] = []
    start = previous = offsets[0]
    for offset in offsets[1:]:
        if offset != previous + 1:
            ranges.append((start, previous + 1))
            start = offset
        previous = offset
    ranges.append((start, previous + 1))
    return ranges


def _encode(watermark: int, ranges: list[tuple[int, int]], count: int) -> str:
    """The metadata for ``ranges`` (sorted, disjoint, not adjacent, above ``watermark``;
    ``count`` offsets in all): the shortest of every encoding, raw or compressed."""
    header = _varint(watermark) + _varint(span := ranges[-1][1] - watermark)
    build = _bodies if len(ranges) <= _SMALL else _bodies_numpy
    bodies = build(watermark, ranges, count, span, header)
    best = b""
    for kind, body in bodies.items():
        crc = zlib.crc32(body).to_bytes(4, "big")
        for flag, data in ((0, body), (_COMPRESSED, zlib.compress(body, 9))):
            payload = bytes([kind | flag]) + crc + data
            if not best or len(payload) < len(best):
                best = payload
    return _PREFIX + base64.b64encode(best).decode("ascii")


def _bodies(
    watermark: int, ranges: list[tuple[int, int]], count: int, span: int, header: bytes
) -> dict[int, bytes]:
    """Each encoding's body that may be the shortest (the others are skipped: see the
    conditions), in plain Python."""
    runs = bytearray()
    previous = watermark
    for start, stop in ranges:
        runs += _varint(start - previous)  # the run not completed before the range
        runs += _varint(stop - start)
        previous = stop
    bodies = {_RUNS: header + runs}
    if count <= 32 * len(ranges):  # one byte or more per offset: long runs never win here
        deltas = bytearray(_varint(count))
        previous = watermark + 1
        for start, stop in ranges:
            # The gap before the range's first offset, then none before each of the rest.
            deltas += _varint(start - previous) + bytes(stop - start - 1)
            previous = stop
        bodies[_DELTAS] = header + deltas
    if span <= 8 * len(runs) * 4:  # a bitset far longer than the runs can never win
        bits = 0
        for start, stop in ranges:
            bits |= (1 << (stop - watermark)) - (1 << (start - watermark))
        bodies[_BITSET] = header + bits.to_bytes((span + 7) // 8, "little")
    return bodies


def _bodies_numpy(
    watermark: int, ranges: list[tuple[int, int]], count: int, span: int, header: bytes
) -> dict[int, bytes]:
    """:func:`_bodies` with numpy, for long maps."""
    import numpy as np  # on first need (see the module docstring)
    bounds = np.array(ranges, dtype=np.uint64)
    starts, stops = bounds[:, 0], bounds[:, 1]
    base = np.uint64(watermark)
    previous = np.concatenate(([base], stops[:-1]))
    lengths = stops - starts
    pairs = np.empty(2 * len(ranges), dtype=np.uint64)
    pairs[0::2] = starts - previous  # the run not completed before each range
    pairs[1::2] = lengths
    runs = _varints(pairs)
    bodies = {_RUNS: header + runs}
    if count <= 32 * len(ranges):
        gaps = np.zeros(count, dtype=np.uint64)
        firsts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        previous[0] = base + np.uint64(1)
        gaps[firsts] = starts - previous  # the gap before each range's first offset
        bodies[_DELTAS] = header + _varint(count) + _varints(gaps)
    if span <= 8 * len(runs) * 4:
        edges = np.zeros(span + 1, dtype=np.int8)
        edges[(starts - base).astype(np.int64)] = 1
        edges[(stops - base).astype(np.int64)] = -1
        bits = np.cumsum(edges[:span], dtype=np.int8).astype(np.bool_)
        bodies[_BITSET] = header + np.packbits(bits, bitorder="little").tobytes()
    return bodies


def _varints(values: np.ndarray) -> bytes:
    """Each of ``values`` (uint64) as LEB128 (:func:`_varint`), concatenated."""
    import numpy as np  # on first need (see the module docstring)
    if not values.size:
        return b""
    sizes = np.ones(values.size, dtype=np.int64)
    rest = values >> np.uint64(7)
    while rest.any():
        sizes += rest > 0
        rest >>= np.uint64(7)
    columns = np.arange(int(sizes.max()))
    shifts = (columns * 7).astype(np.uint64)
    groups = ((values[:, None] >> shifts[None, :]) & np.uint64(0x7F)).astype(np.uint8)
    groups |= np.where(columns[None, :] < sizes[:, None] - 1, 0x80, 0).astype(np.uint8)
    return groups[columns[None, :] < sizes[:, None]].tobytes()


def _decode(metadata: object, committed: int) -> OffsetMap:
    """The map in ``metadata`` for offset ``committed``; raises _Refused saying why not."""
    if not isinstance(metadata, str):
        raise _Refused(f"it is a {type(metadata).__name__}, not text")
    if not metadata.startswith(_PREFIX):
        if metadata.startswith(_FAMILY):
            raise _Refused(
                f"it is a version of the offset map this release cannot read "
                f"(it reads {_PREFIX!r}); an upgraded member wrote it"
            )
        raise _Refused("it is not a priority_kafka offset map (another tool's metadata?)")
    if len(metadata) > MAX_METADATA_BYTES:
        raise _Refused(f"it is longer than {MAX_METADATA_BYTES} characters")
    try:
        payload = base64.b64decode(metadata[len(_PREFIX):], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _Refused(f"it is not valid base64 ({exc})") from None
    if len(payload) < 5:
        raise _Refused("it is too short")
    kind, crc, data = payload[0], payload[1:5], payload[5:]
    if kind & _COMPRESSED:
        inflater = zlib.decompressobj()
        try:
            body = inflater.decompress(data, _MAX_BODY_BYTES)
        except zlib.error as exc:
            raise _Refused(f"its compressed body is corrupt ({exc})") from None
        if inflater.unconsumed_tail:
            raise _Refused(f"its body inflates past {_MAX_BODY_BYTES} bytes")
        if not inflater.eof or inflater.unused_data:
            raise _Refused("its compressed body is truncated or followed by other bytes")
    else:
        body = data
    if zlib.crc32(body).to_bytes(4, "big") != crc:
        raise _Refused("its checksum does not match (corrupt or altered)")
    reader = _Reader(body)
    watermark, span = reader.varint(), reader.varint()
    if watermark != committed:
        raise _Refused(
            f"it was written for offset {watermark} but the committed offset is {committed} "
            "(offsets reset or committed by another tool)"
        )
    end = watermark + span
    if end > _MAX_OFFSET + 1:
        raise _Refused(f"it covers offsets past the largest offset ({end})")
    encoding = kind & ~_COMPRESSED
    if encoding == _RUNS:
        ranges = _read_runs(reader, watermark)
    elif encoding == _DELTAS:
        ranges = _read_deltas(reader, watermark)
    elif encoding == _BITSET:
        ranges = _read_bitset(reader, watermark, span)
    else:
        raise _Refused(f"its encoding {encoding} is unknown")
    if reader.remaining:
        raise _Refused(f"{reader.remaining} bytes follow the map")
    if ranges and ranges[0][0] <= watermark:
        raise _Refused("it marks the committed offset itself completed")
    if ranges and ranges[-1][1] > end:
        raise _Refused(f"its offsets pass the end it declares ({end})")
    return OffsetMap(watermark, end, tuple(ranges))


def _read_runs(reader: _Reader, watermark: int) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    position = watermark
    while reader.remaining:
        start = position + reader.varint()
        length = reader.varint()
        if length == 0 or (ranges and start == position):
            raise _Refused("its runs are not alternating runs of positive length")
        position = start + length
        ranges.append((start, position))
    return ranges


def _read_deltas(reader: _Reader, watermark: int) -> list[tuple[int, int]]:
    count = reader.varint()
    if count > reader.remaining:  # every delta takes at least one byte
        raise _Refused(f"it claims {count} offsets in {reader.remaining} bytes")
    offsets = []
    position = watermark
    for _ in range(count):
        position += reader.varint() + 1
        offsets.append(position)
    return _ranges(offsets) if offsets else []


def _read_bitset(reader: _Reader, watermark: int, span: int) -> list[tuple[int, int]]:
    data = reader.rest()
    if len(data) != (span + 7) // 8:
        raise _Refused(f"its bitset has {len(data)} bytes for a span of {span} offsets")
    ranges_of = _bitset_ranges if len(data) <= _SMALL else _bitset_ranges_numpy
    return ranges_of(data, watermark, span)


def _bitset_ranges(data: bytes, watermark: int, span: int) -> list[tuple[int, int]]:
    """The completed ranges a bitset of ``span`` offsets from ``watermark`` marks."""
    bits = int.from_bytes(data, "little")
    if bits >> span:
        raise _Refused("its bitset has bits set past its span")
    ranges = []
    position = watermark
    while bits:
        zeros = (bits & -bits).bit_length() - 1  # up to the next set bit
        bits >>= zeros
        ones = ((bits + 1) & -(bits + 1)).bit_length() - 1  # the run of set bits
        bits >>= ones
        ranges.append((position + zeros, position + zeros + ones))
        position += zeros + ones
    return ranges


def _bitset_ranges_numpy(data: bytes, watermark: int, span: int) -> list[tuple[int, int]]:
    """:func:`_bitset_ranges` with numpy, for long bitsets."""
    import numpy as np  # on first need (see the module docstring)
    bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
    if bits[span:].any():
        raise _Refused("its bitset has bits set past its span")
    # Range boundaries are where the bit changes (edges padded with zeros on both sides).
    edges = np.flatnonzero(np.diff(np.concatenate(([0], bits[:span], [0])).astype(np.int8)))
    return [
        (watermark + int(start), watermark + int(stop))
        for start, stop in zip(edges[::2], edges[1::2], strict=True)
    ]


def _varint(value: int) -> bytes:
    """``value`` (unsigned) as LEB128: 7 bits a byte, lowest first."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _Reader:
    """Reads varints from a body, refusing anything malformed."""

    __slots__ = ("_data", "_index")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._index = 0

    @property
    def remaining(self) -> int:
        return len(self._data) - self._index

    def rest(self) -> bytes:
        rest = self._data[self._index:]
        self._index = len(self._data)
        return rest

    def varint(self) -> int:
        value = shift = 0
        while True:
            if self._index >= len(self._data):
                raise _Refused("it ends inside a number")
            byte = self._data[self._index]
            self._index += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 63:
                raise _Refused("a number in it is longer than 64 bits")
        return value
