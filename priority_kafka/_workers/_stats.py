"""The executor's counters, and the typed snapshot :meth:`ShardedExecutor.stats` returns."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import attrs

__all__ = ["Counters", "ExecutorStats"]


@attrs.frozen
class ExecutorStats:
    """What a :class:`~priority_kafka.ShardedExecutor` has done so far, and holds now.

    Counters since :meth:`~priority_kafka.ShardedExecutor.run` started: records ``handled``,
    ``dead_lettered``, ``called_back`` (the failure callback accepted them), ``failed``,
    ``abandoned`` (retries cut short by stop); handler ``retries``; ``commits`` and
    ``commit_failures``; ``stale_completions`` (finished after their partition was revoked);
    ``skipped_redeliveries`` (records received again while still tracked);
    ``revoked_records`` (returned by a poll for a partition revoked during it: dropped, the
    new owner handles them); ``pauses``;
    ``stuck_warnings`` (records found running longer than ``stuck_warning_ms``).
    Offset maps: ``skipped_completed`` (records not handled because the commit a partition was
    taken on with says they were done), ``offset_maps`` (partition commits that carried a map),
    ``offset_map_bytes`` (their metadata, in all), ``largest_offset_map`` (the longest, in
    bytes), ``truncated_offset_maps`` (maps cut to ``offset_metadata_max_bytes``: their highest
    offsets replay after a crash), ``ignored_offset_maps`` (metadata found in a commit that
    was no valid map, ignored with a warning). Exactly-once: ``transactions`` committed,
    ``aborted_transactions``, ``outputs`` produced in committed transactions,
    ``renewed_producers`` (fenced transactional producers replaced from the factory),
    ``membership_rejoins`` (a group refused a transaction's offsets for a member or
    generation it no longer knows: its member was made to rejoin at once).
    Gauges: ``in_flight`` (received, not done), ``queued`` and ``running`` records,
    ``paused_partitions``, and ``in_flight_bytes`` (keys and values of the records received
    since their partitions' commit watermarks, as bounded by ``max_in_flight_bytes``).
    """

    handled: int = 0
    dead_lettered: int = 0
    called_back: int = 0
    failed: int = 0
    abandoned: int = 0
    retries: int = 0
    commits: int = 0
    commit_failures: int = 0
    stale_completions: int = 0
    skipped_redeliveries: int = 0
    revoked_records: int = 0
    pauses: int = 0
    stuck_warnings: int = 0
    skipped_completed: int = 0
    offset_maps: int = 0
    offset_map_bytes: int = 0
    largest_offset_map: int = 0
    truncated_offset_maps: int = 0
    ignored_offset_maps: int = 0
    transactions: int = 0
    aborted_transactions: int = 0
    outputs: int = 0
    renewed_producers: int = 0
    membership_rejoins: int = 0
    in_flight: int = 0
    queued: int = 0
    running: int = 0
    paused_partitions: int = 0
    in_flight_bytes: int = 0

    def as_dict(self) -> dict[str, int]:
        """The same figures as a dict (for logs and JSON)."""
        return attrs.asdict(self)

    def __getitem__(self, name: str) -> int:
        # Dict-style access, as stats() returned a dict before 0.2.
        if name not in _FIELDS:
            raise KeyError(name)
        value: int = getattr(self, name)
        return value

    def get(self, name: str, default: Any = None) -> Any:
        """Dict-style access with a default for unknown names."""
        return getattr(self, name) if name in _FIELDS else default


_FIELDS = frozenset(field.name for field in attrs.fields(ExecutorStats))


class Counters:
    """Thread-safe event counters (workers, the polling thread and rebalance hooks add)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, name: str, count: int = 1) -> None:
        """Count ``count`` events called ``name``."""
        assert name in _FIELDS, name
        with self._lock:
            self._counts[name] += count

    def at_least(self, name: str, value: int) -> None:
        """Raise the figure ``name`` to ``value`` if it is lower (a high-water mark)."""
        assert name in _FIELDS, name
        with self._lock:
            if self._counts[name] < value:
                self._counts[name] = value

    def snapshot(self, **gauges: int) -> ExecutorStats:
        """The counts so far, with the given gauges."""
        with self._lock:
            counts = dict(self._counts)
        return ExecutorStats(**counts, **gauges)
