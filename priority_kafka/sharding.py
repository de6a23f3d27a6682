"""Which records must run one after another: ordering modes and the lane a record belongs to.

A *lane* is a sequence of records the executor runs one at a time, in offset order; records of
different lanes run in parallel on any free worker. The ordering mode decides the lanes:

- ``"key"``: one lane per (topic, partition, key). Records without a key share one lane per
  partition, so they stay in partition order.
- ``"partition"``: one lane per (topic, partition).
- ``"unordered"``: every record is its own lane.

Keys are reduced with a stable hash (CRC-32, the same in every process and run; Python's
built-in ``hash()`` is salted per process and must not be used), so a lane id is small whatever
the key size. Two keys that collide share a lane: that only orders them more strictly, never
less.

Pure: no Kafka, threads or clocks.
"""

from __future__ import annotations

import zlib
from typing import Final, Literal, TypeAlias

from priority_kafka._checks import shown
from priority_kafka.errors import ConfigError

__all__ = ["ORDERINGS", "Lane", "Ordering", "check_ordering", "lane_of", "stable_hash"]

Ordering: TypeAlias = Literal["key", "partition", "unordered"]
ORDERINGS: Final[tuple[Ordering, ...]] = ("key", "partition", "unordered")

#: A lane id: (topic, partition, key hash) in "key" mode (None for records without a key),
#: (topic, partition, None) in "partition" mode, (topic, partition, -1 - offset) in "unordered".
Lane: TypeAlias = tuple[str, int, int | None]


def check_ordering(value: object) -> Ordering:
    """Return ``value`` if it is an ordering mode, else raise ConfigError naming the choices."""
    if not isinstance(value, str) or value not in ORDERINGS:
        raise ConfigError(
            f"'ordering' must be one of {', '.join(ORDERINGS)} (got {shown(value)})."
        )
    return value


def stable_hash(key: bytes) -> int:
    """A 32-bit hash of ``key`` that is the same in every process (CRC-32)."""
    return zlib.crc32(key)


def lane_of(topic: str, partition: int, key: bytes | None, offset: int, ordering: Ordering) -> Lane:
    """The lane of the record at ``offset`` of ``topic``/``partition`` with ``key``."""
    if ordering == "key":
        return (topic, partition, None if key is None else stable_hash(key))
    if ordering == "partition":
        return (topic, partition, None)
    # Negative, so it can never equal a key hash of the same partition.
    return (topic, partition, -1 - offset)
