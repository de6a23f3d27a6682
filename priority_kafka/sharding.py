"""Which records must run one after another: the ordering modes.

A *lane* is a sequence of records the executor runs one at a time, in offset order; records of
different lanes run in parallel on any free worker. The ordering mode decides the lanes
(:class:`priority_kafka.scheduling.LaneQueue` keeps them):

- ``"key"``: one lane per (topic, partition, key). Records without a key share one lane per
  partition, so they stay in partition order. A lane is found by the key itself (the bytes, as
  a dict key), so distinct keys never share a lane; lanes live only in the process, so Python's
  per-process hash salt does not matter.
- ``"partition"``: one lane per (topic, partition).
- ``"unordered"``: no order at all: any worker may run any record of the partition at any time.

Pure: no Kafka, threads or clocks.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

from priority_kafka._checks import shown
from priority_kafka.errors import ConfigError

__all__ = ["ORDERINGS", "Ordering", "check_ordering"]

Ordering: TypeAlias = Literal["key", "partition", "unordered"]
ORDERINGS: Final[tuple[Ordering, ...]] = ("key", "partition", "unordered")


def check_ordering(value: object) -> Ordering:
    """Return ``value`` if it is an ordering mode, else raise ConfigError naming the choices."""
    if not isinstance(value, str) or value not in ORDERINGS:
        raise ConfigError(
            f"'ordering' must be one of {', '.join(ORDERINGS)} (got {shown(value)})."
        )
    return value
