"""One priority level of a PriorityConsumer: its client consumer, prefetch buffer and poll gate.

The facade (:class:`~priority_kafka.consumer.PriorityConsumer`) owns one :class:`Level` per
priority level and talks to it from the polling thread. The rebalance hooks
(:meth:`Level.revoked`, :meth:`Level.lost`, :meth:`Level.assigned`) are the only entry points
kafka-python calls from its IO thread, while the polling thread waits inside ``poll()``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

import attrs

from priority_kafka._gc import gc_running
from priority_kafka.added import AddedPartitions
from priority_kafka.config import DEFAULT_FETCH_BUFFER_BYTES
from priority_kafka.kafka_python._kafka import (
    KEPT_PARTITIONS_POLL_MS,
    POSITION_SURVIVES_REASSIGNMENT,
    ConsumerRecord,
    OffsetAndMetadata,
    TopicPartition,
    chase_fetch,
    fetch_kept_partitions,
    force_rejoin,
    group_progress,
    keep_pending_join,
    keeps_partitions_while_joining,
    poll_through_lost_connections,
    read_added_from_start,
    release_parked_records,
)
from priority_kafka.kafka_python.consumer._delivered import Delivered, DeliveredOffsets
from priority_kafka.kafka_python.consumer._fetch import (
    partition_fetch_bytes,
    set_partition_fetch_bytes,
)
from priority_kafka.kafka_python.consumer._polling import PollGate, PollTiming, RebalanceWatchdog
from priority_kafka.prefetch import PrefetchBuffer

__all__ = ["Level", "close_levels", "commit_offsets", "open_levels"]

log = logging.getLogger("priority_kafka.consumer._level")  # named as before the move

Records = dict[TopicPartition, list[ConsumerRecord]]


def commit_offsets(delivered: Mapping[TopicPartition, Delivered]) -> dict[TopicPartition, Any]:
    """kafka-python's commit argument for delivered offsets."""
    return {tp: OffsetAndMetadata(d.offset, "", d.leader_epoch) for tp, d in delivered.items()}


@attrs.define(eq=False, repr=False)
class Level:
    """A priority level: reads its topics through ``consumer`` (a kafka-python consumer).

    ``delivered`` is the facade's ledger of returned offsets (shared by all levels);
    ``commits_on_revoke`` is whether auto-commit owes a commit before a rebalance.
    """

    level: int
    consumer: Any
    gate: PollGate
    delivered: DeliveredOffsets[TopicPartition]
    commits_on_revoke: bool
    watchdog: RebalanceWatchdog
    buffer: PrefetchBuffer[TopicPartition] = attrs.field(factory=PrefetchBuffer)
    #: Partition counts at the first assignment: later partitions are read from their start.
    added: AddedPartitions = attrs.field(factory=AddedPartitions)
    #: Records returned over the consumer's life, and this level's quota in the last poll.
    returned: int = 0
    last_quota: int = 0
    #: Set by the facade's close(): kafka-python revokes everything then, and close() commits.
    closing: bool = False
    #: The bytes this level may fetch ahead: its share of fetch_buffer_bytes, in kafka-python's
    #: fetcher and again in its prefetch buffer (see consumer._fetch).
    fetch_share: int = DEFAULT_FETCH_BUFFER_BYTES
    #: The most max_partition_fetch_bytes it sets; None: the caller gave that setting.
    fetch_ceiling: int | None = None
    #: Whether _watch_group saw the group unsettled since it was last settled.
    _rejoin_seen: bool = attrs.field(default=False, init=False)
    #: Whether this round's refill polled records outside a join: its poll then sent the next
    #: fetch, which :meth:`chase` may wait for.
    _flowing: bool = attrs.field(default=False, init=False)

    def __repr__(self) -> str:
        return f"Level({self.level}, buffered={len(self.buffer)}, joined={self.gate.joined})"

    # -- polling thread -----------------------------------------------------------------------

    def refill(self, *, wait_ms: float, share: int, chunk: int) -> None:
        """Poll the client when the gate says so (blocking up to ``wait_ms`` or join time).

        ``share`` is what this poll may take from the level, ``chunk`` the most the buffer holds
        (fewer once its records reach the level's ``fetch_share`` of bytes).
        """
        self._flowing = False
        now = time.monotonic()
        wanted = share > 0 and self.available() < share
        buffered = len(self.buffer)
        size = self.buffer.record_size
        if size:  # as many more records as fit in the level's share of bytes (one at least)
            room = max(0, self.fetch_share - self.buffer.bytes()) // size
            chunk = min(chunk, max(buffered + room, 1))
        request = self.gate.request(
            now, wait_ms=wait_ms, wanted=wanted, buffered=buffered, chunk=chunk
        )
        if request is None:
            return
        release_parked_records(self.consumer)
        timeout_ms = request.timeout_ms
        kept = keeps_partitions_while_joining(self.consumer)
        if kept:
            timeout_ms = min(timeout_ms, max(int(wait_ms), KEPT_PARTITIONS_POLL_MS))
        with gc_running() if timeout_ms else nullcontext():
            fetched = poll_through_lost_connections(
                self.consumer, timeout_ms=timeout_ms, max_records=request.max_records)
        if fetched is None:  # not an empty poll: polled again next round, however quiet
            return
        keep_pending_join(self.consumer)
        if kept and not fetched:
            fetched = fetch_kept_partitions(self.consumer, request.max_records)
        self._flowing = bool(fetched) and not kept
        self.gate.polled(now, bool(fetched))
        self.buffer.extend(fetched)
        self._watch_group(now)

    def chase(self, *, share: int, wait_ms: float) -> None:
        """After a refill that polled records, while the buffer holds no more than ``share``
        (what this poll may take of the level): wait up to ``wait_ms`` for the fetch that poll
        sent and buffer its records, so they come with this ``poll()``, and leave the next
        fetch in flight until the next one (see ``_kafka.FETCH_SENT_ONLY_IN_POLL``). A level
        with more buffered than its share has nothing to gain this poll, and is not waited
        for."""
        if not self._flowing or len(self.buffer) > share:
            return
        self._flowing = False
        self.buffer.extend(chase_fetch(self.consumer, max(share - len(self.buffer), 1), wait_ms))

    def _watch_group(self, now: float) -> None:
        """Give an unsettled group join time; rejoin one that stopped progressing."""
        membership = group_progress(self.consumer)
        if membership is None:
            return
        settled, progress = membership
        if not settled:
            # Also a rejoin no revoke announced (cooperative, or metadata-triggered ones).
            self.gate.revoked()
            self._rejoin_seen = True
        elif self._rejoin_seen:
            # Such a rejoin may end without on_partitions_assigned (a cooperative round that
            # adds nothing): the group is stable again, so the level stops waiting for it.
            self._rejoin_seen = False
            self.gate.assigned(now, empty=not self.consumer.assignment())
        if self.watchdog.stalled(now, settled, progress):
            log.warning(
                "Priority level %d: its consumer group has not progressed for %.0f s (%s); "
                "forcing a rejoin.",
                self.level,
                self.watchdog.limit_s,
                progress[0],
            )
            force_rejoin(self.consumer)

    def available(self) -> int:
        """Records that :meth:`take` could return now (paused partitions' records wait)."""
        return self.buffer.available(self._paused())

    def take(self, limit: int) -> Records:
        """Up to ``limit`` buffered records, oldest first, none of a paused partition."""
        return self.buffer.take(limit, self._paused())

    def unread(self, records: Mapping[TopicPartition, Sequence[ConsumerRecord]]) -> None:
        """Put records taken from this level back in front, in the same order."""
        self.buffer.unread(records)

    def drop(self, partitions: Iterable[TopicPartition], *, rewind: bool) -> None:
        """Forget the buffered records of ``partitions``.

        With ``rewind``, each partition still assigned is sought back to its first dropped
        record: the client's position is past them (and survives a reassignment).
        """
        first = self.buffer.drop(partitions)
        if rewind and first and POSITION_SURVIVES_REASSIGNMENT:
            assigned = self.consumer.assignment()
            for tp, offset in first.items():
                if tp in assigned:
                    self.consumer.seek(tp, offset)

    def first_offset(self, partition: TopicPartition) -> int | None:
        """Offset of the oldest buffered record of ``partition`` (where it really is)."""
        return self.buffer.first_offsets().get(partition)

    def _paused(self) -> set[TopicPartition] | tuple[()]:
        return self.consumer.paused() if self.buffer else ()

    # -- rebalance hooks (kafka-python's IO thread, while the polling thread is in poll()) ----

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        """Commit what was returned of ``partitions`` (auto-commit), drop their buffer.

        An eager revoke comes before the group rejoins, the partitions still assigned; a
        cooperative one once the rejoin is done, the partitions already gone from the
        assignment (kafka-python updates it first) and the rest still fetched: no join to wait
        for, and the generation is current, so the commit is still accepted.
        """
        if partitions & self.consumer.assignment():
            self.gate.revoked()
        if self.closing:
            return
        owed = self.delivered.of(partitions)
        self.drop(partitions, rewind=True)
        self.delivered.forget(partitions)
        if owed and self.commits_on_revoke:
            # kafka-python's own pre-rebalance auto-commit, of what was returned instead of what
            # was fetched. A blocking commit() is refused on the IO thread; awaiting
            # commit_async completes it while the partitions are still ours.
            offsets = commit_offsets(owed)
            try:
                await self.consumer.commit_async(offsets=offsets)
            except Exception:
                log.warning(
                    "Pre-rebalance offset commit of %s failed: their records after the last "
                    "commit will be delivered again.",
                    offsets,
                    exc_info=True,
                )

    async def lost(self, partitions: set[TopicPartition]) -> None:
        """Evicted from the group: drop the partitions' buffer, commit nothing."""
        self.gate.revoked()
        if self.closing:
            return
        self.drop(partitions, rewind=True)
        self.delivered.forget(partitions)

    async def assigned(self, partitions: set[TopicPartition]) -> None:
        """The level's group settled; partitions added to their topic since the level's first
        assignment and never committed are read from their start (whatever
        ``auto_offset_reset`` says: it would skip what was produced before we noticed them)."""
        self.gate.assigned(time.monotonic(), empty=not partitions)
        if self.fetch_ceiling is not None:
            set_partition_fetch_bytes(self.consumer, partition_fetch_bytes(
                self.fetch_share, len(self.consumer.assignment()), self.fetch_ceiling
            ))
        try:
            fresh = await read_added_from_start(self.consumer, self.added, partitions)
        except Exception:
            # The reset policy applies, as in any Kafka consumer: said loudly, not hidden.
            log.warning("Priority level %d: could not check the committed offsets of "
                        "partitions added to its topics; auto_offset_reset applies to them.",
                        self.level, exc_info=True)
            return
        if fresh:
            log.info("Priority level %d: partitions %s were added after its first assignment "
                     "and have no committed offset; reading them from their start.",
                     self.level, sorted(fresh))


def open_levels(
    numbers: Iterable[int],
    client: Callable[[int], Any],
    *,
    timing: PollTiming,
    delivered: DeliveredOffsets[TopicPartition],
    auto_commit: bool,
    session_timeout_ms: float,
    fetch_share: int,
    fetch_ceiling: int | None,
) -> dict[int, Level]:
    """One :class:`Level` per number, in the order given, each over ``client(number)``, each
    fetching ahead at most ``fetch_share`` bytes (see :class:`Level`).

    If a client cannot be built, the ones already built are closed before the error rises.
    """
    levels: dict[int, Level] = {}
    try:
        for number in numbers:
            levels[number] = Level(
                number,
                client(number),
                PollGate(timing),
                delivered,
                auto_commit,
                RebalanceWatchdog.for_session(session_timeout_ms),
                fetch_share=fetch_share,
                fetch_ceiling=fetch_ceiling,
            )
    except BaseException:
        close_levels(levels)
        raise
    return levels


def close_levels(levels: Mapping[int, Level], timeout_ms: int | None = None) -> None:
    """Close every level's consumer, committing nothing.

    The level consumers never auto-commit (the facade does), and the revoke hooks that
    kafka-python runs while closing commit nothing (the facade's close() did).
    """
    for level in levels.values():
        level.closing = True
        level.consumer.close(autocommit=False, timeout_ms=timeout_ms)
