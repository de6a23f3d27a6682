"""What a client family's Spark range reader is, and the Arrow columns it builds.

:func:`priority_kafka.spark.range_reader.read_range` drives a :class:`PartitionReader`, which
each family's Spark adapter (``<family folder>/_spark.py``, found through
:meth:`priority_kafka.families.Family.spark`) provides as its ``Reader``; the reader turns its
client's records into one Arrow batch with the builders below, so every family fills the
source's columns alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
import pyarrow as pa

from priority_kafka.spark.ranges import OffsetRange

__all__ = [
    "Fetched", "PartitionReader", "binary_array", "constant_columns", "headers_column",
    "numpy_array", "record_batch", "timestamp_array",
]


class Fetched(NamedTuple):
    """What one fetch of a partition gave."""

    #: The records, in offset order (the client's own record objects).
    records: list[Any]
    #: The fetch position was out of the log's range (retention, truncation).
    out_of_range: bool = False
    #: The offset reading has got to (past the records and any hidden offsets after them), if
    #: the client said so in this fetch.
    position: int | None = None


class PartitionReader(Protocol):
    """One client's consumer of one partition, as the range loop needs it."""

    #: The offset of one of this client's records.
    offset: Callable[[Any], int]

    def fetch(self, max_records: int, timeout_ms: int) -> Fetched:
        """Wait up to ``timeout_ms`` for at most ``max_records`` records."""

    def watermarks(self) -> tuple[int, int]:
        """The partition's first offset and the offset its next record will get."""

    def seek(self, offset: int) -> None:
        """Fetch from ``offset`` next."""

    def close(self) -> None:
        """Close the consumer."""

    def to_arrow(
        self, records: Sequence[Any], offset_range: OffsetRange, schema: pa.Schema
    ) -> pa.RecordBatch:
        """One record batch of ``records`` in the source's Arrow schema."""


def constant_columns(
    count: int, offset_range: OffsetRange
) -> dict[str, pa.Array]:
    """The columns every record of a range shares."""
    topic = offset_range.topic.encode()
    return {
        "topic": pa.Array.from_buffers(pa.string(), count, [
            None,
            pa.py_buffer(np.arange(0, (count + 1) * len(topic), len(topic), dtype=np.int32)),
            pa.py_buffer(topic * count),
        ]),
        "partition": numpy_array(np.full(count, offset_range.partition, np.int32), pa.int32()),
        "priority": numpy_array(np.full(count, offset_range.priority, np.int32), pa.int32()),
    }


# The columns are built from buffers, never with pa.array() or pa.scalar(): the first of those
# in a process imports pandas (pyarrow checks whether its argument is a pandas object), which
# cost each new Spark Python worker about 0.3 s of CPU before its first batch.


def numpy_array(values: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    """A null-free Arrow array over ``values`` (contiguous, of ``arrow_type``'s width)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


def binary_array(values: list[bytes | None]) -> pa.Array:
    """An Arrow ``binary`` array of ``values`` (None is null), the bytes copied once."""
    count = len(values)
    nulls = values.count(None)
    if nulls == count:
        return pa.nulls(count, pa.binary())
    validity = None
    present: list[bytes] = values  # type: ignore[assignment]  # no None once replaced below
    if nulls:
        valid = np.fromiter(map(_is_not_none, values), np.bool_, count)
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        present = [b"" if value is None else value for value in values]
    data = b"".join(present)
    if len(data) > _MAX_BINARY_BYTES:  # more than int32 offsets address: pyarrow's own way
        return pa.array(values, type=pa.binary())
    offsets = np.empty(count + 1, np.int32)
    offsets[0] = 0
    np.cumsum(np.fromiter(map(len, present), np.int32, count), out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), count, [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=nulls,
    )


#: The most bytes a ``binary`` array's int32 offsets address.
_MAX_BINARY_BYTES = 2**31 - 1


def _is_not_none(value: object) -> bool:
    return value is not None


def headers_column(
    headers: Iterable[Sequence[tuple[str, bytes | None]] | None],
) -> list[list[dict[str, Any]] | None]:
    """The ``headers`` column from each record's (key, value) pairs: null, not [], for a record
    without headers, as Spark's own Kafka source returns."""
    return [
        [{"key": key, "value": value} for key, value in pairs] if pairs else None
        for pairs in headers
    ]


def timestamp_array(millis: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    """Spark's timestamp column (microseconds) from Kafka's milliseconds."""
    return numpy_array(millis.astype(np.int64) * 1000, arrow_type)


def record_batch(columns: dict[str, Any], schema: pa.Schema) -> pa.RecordBatch:
    """Arrange ``columns`` (Arrow arrays or Python lists) in ``schema``'s order and types."""
    arrays = [
        column if isinstance(column := columns[field.name], pa.Array)
        else pa.array(column, type=field.type)
        for field in schema
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)

