"""Exactly-once outputs: what a handler returns, kept per record until a transaction covers it.

Under exactly-once (``ShardedExecutor(..., transactional_producer=...)``) a handler returns the
records it produces as :class:`Output` objects instead of sending them. :class:`OutputBuffer`
keeps each record's outputs, keyed by its partition and offset, from the moment the handler
returns until a commit covers the record (below the watermark, or carried in the offset map):
the commit's transaction then produces them, with the offsets that cover them. A record whose
handler is still running, or that failed, has no outputs here, so a transaction never holds
part of a record's output.

Keyed by offset and *replaced* on a second store: a worker that finishes a record after its
partition was taken back (revoke, rewind) and handed out again stores the same record's
outputs, never a second copy; what a previous commit already covered is dropped, not taken.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from typing import Any

import attrs

from priority_kafka._structs import TopicPartition
from priority_kafka.commit_plan import CommitPlan

__all__ = ["Output", "OutputBuffer", "outputs_of"]


def _headers(value: Iterable[tuple[str, bytes]] | None) -> tuple[tuple[str, bytes], ...]:
    return tuple(value or ())


@attrs.frozen
class Output:
    """A record a handler produces under exactly-once, sent in the transaction that commits
    the offsets of the record it came from.

    ``value`` and ``key`` go to the transactional producer as they are (its serializers, if
    any, apply); ``partition`` None lets the producer's partitioner choose (by key).
    """

    topic: str
    value: Any = None
    key: Any = None
    headers: tuple[tuple[str, bytes], ...] = attrs.field(default=(), converter=_headers)
    partition: int | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.topic, str) or not self.topic:
            raise TypeError(f"Output 'topic' must be a topic name (got {self.topic!r}).")


def outputs_of(result: object) -> tuple[Output, ...]:
    """A handler's return value as outputs: None (nothing), an :class:`Output`, or an
    iterable of them; TypeError naming what else it was (the record counts as failed)."""
    if result is None:
        return ()
    if isinstance(result, Output):
        return (result,)
    if isinstance(result, Iterable) and not isinstance(result, str | bytes | dict):
        outputs = tuple(result)
        if all(isinstance(output, Output) for output in outputs):
            return outputs
    raise TypeError(
        "under exactly-once a handler returns None, an Output or a list of Outputs "
        f"(got {type(result).__name__})"
    )


class OutputBuffer:
    """The outputs of finished records, per partition and offset, until a commit takes them.

    Thread use: :meth:`keep` from worker threads; the rest from the thread that commits (the
    polling thread, or the rebalance hook while the polling thread waits in ``poll()``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[TopicPartition, dict[int, tuple[Output, ...]]] = {}

    def __repr__(self) -> str:
        with self._lock:
            return f"OutputBuffer(records={sum(map(len, self._kept.values()))})"

    def keep(self, tp: TopicPartition, offset: int, outputs: tuple[Output, ...]) -> None:
        """``offset`` of ``tp`` finished with ``outputs`` (replacing any kept before)."""
        if outputs:
            with self._lock:
                self._kept.setdefault(tp, {})[offset] = outputs

    def take(
        self, tp: TopicPartition, plan: CommitPlan, last: CommitPlan | None
    ) -> list[Output]:
        """The outputs of the records ``plan`` covers and ``last`` (the partition's last
        commit) did not, in offset order; they leave the buffer, as do those ``last`` covers
        (a late store of a record already committed)."""
        with self._lock:
            kept = self._kept.get(tp)
            if not kept:
                return []
            taken = sorted(
                offset for offset in kept
                if plan.covers(offset) or (last is not None and last.covers(offset))
            )
            outputs: list[Output] = []
            for offset in taken:
                record_outputs = kept.pop(offset)
                if last is None or not last.covers(offset):
                    outputs.extend(record_outputs)
            if not kept:
                del self._kept[tp]
            return outputs

    def drop(self, partitions: Collection[TopicPartition]) -> int:
        """Forget the outputs of ``partitions`` (revoked, lost or rewound); how many records'."""
        with self._lock:
            return sum(len(self._kept.pop(tp, {})) for tp in partitions)

    def records(self) -> int:
        """Records whose outputs are kept now."""
        with self._lock:
            return sum(map(len, self._kept.values()))

