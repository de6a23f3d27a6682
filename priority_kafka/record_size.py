"""The size of records in bytes: their keys and values as stored in Kafka.

What the byte bounds count (the executor's ``max_in_flight_bytes``, a level's prefetch within
``fetch_buffer_bytes``). kafka-python's records carry ``serialized_key_size`` and
``serialized_value_size`` (-1 for None), as the confluent adapter's do, summed here in C at a
few tens of nanoseconds a record; anything else counts the lengths of a bytes or str key and
value (a test's record, an undeserializable one).

Pure: no Kafka, threads or clocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

__all__ = ["record_bytes"]

_KEY_SIZE = attrgetter("serialized_key_size")
_VALUE_SIZE = attrgetter("serialized_value_size")
_POSITIVE = (0).__lt__  # drops the -1 of a missing key or value


def _stored_size(record: Any) -> int:
    """Key and value bytes of one record without kafka-python's size fields."""
    size = 0
    for part in (getattr(record, "key", None), getattr(record, "value", None)):
        if isinstance(part, bytes | bytearray | memoryview | str):
            size += len(part)
    return size


def record_bytes(records: Sequence[Any]) -> int:
    """The bytes of ``records``' keys and values as stored (a missing one: 0)."""
    try:
        return sum(filter(_POSITIVE, map(_KEY_SIZE, records))) + sum(
            filter(_POSITIVE, map(_VALUE_SIZE, records))
        )
    except AttributeError:
        return sum(map(_stored_size, records))
