"""Work-arounds for kafka-python bugs, each isolated here with the versions it applies to."""

from __future__ import annotations

from typing import Any

__all__ = ["release_parked_records"]


def release_parked_records(consumer: Any) -> None:
    """Let a resumed partition's parked records be returned again (kafka-python 3.0.x bug).

    kafka-python 3.0 keeps records fetched for a paused partition aside (KAFKA-7548) and
    restores them after ``resume()`` only when its in-line ``PartitionRecords`` slot is None,
    one partition per ``poll()``. A fully drained slot is falsy but not None and stays until
    another fetch arrives, while a parked partition is excluded from fetching: once no other
    partition has new data, a resumed partition is never consumed again. Clearing the drained
    slot (it holds no records) lets ``poll()`` restore the parked data. Call before every
    ``poll()``, on the polling thread; consumers without that internal state are left alone.
    """
    fetcher = getattr(consumer, "_fetcher", None)
    in_line = getattr(fetcher, "_next_partition_records", None)
    if in_line is not None and not in_line:
        fetcher._next_partition_records = None  # type: ignore[union-attr]
