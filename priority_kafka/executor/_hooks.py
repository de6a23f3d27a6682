"""The executor's rebalance hooks: finish and commit revoked partitions, drop lost ones.

They run where the consumer runs its listener: kafka-python on its IO thread while the polling
thread waits inside ``poll()``. So they may not call a blocking consumer method: the revoke
commit is ``commit_async`` awaited in place (it completes before the group rejoins, while the
partitions are still ours).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from typing import Any

from priority_kafka._structs import TopicPartition
from priority_kafka._workers import Counters, WorkerPool
from priority_kafka.executor._ledger import PartitionLedger
from priority_kafka.executor._loop_pool import LoopPool
from priority_kafka.executor._tasks import TaskPool
from priority_kafka.executor._transactions import TransactionalCommits

__all__ = ["ExecutorHooks"]

log = logging.getLogger("priority_kafka.executor")


class ExecutorHooks:
    """:class:`~priority_kafka._rebalance.RebalanceHooks` of a ShardedExecutor.

    ``stopping`` is set once ``run()`` began shutting down. ``transactions`` (exactly-once):
    revoked partitions are committed in a transaction with their outputs, instead of a plain
    commit.
    """

    def __init__(
        self,
        consumer: Any,
        ledger: PartitionLedger,
        pool: WorkerPool | LoopPool,
        *,
        stopping: threading.Event,
        revoke_timeout_s: float,
        transactions: TransactionalCommits | None = None,
        counters: Counters | None = None,
    ) -> None:
        self._consumer = consumer
        self._transactions = transactions
        self._ledger = ledger
        #: The pool the hooks wait for: ``run_async()`` gives async handlers a TaskPool.
        self.pool: WorkerPool | LoopPool | TaskPool = pool
        #: Whether the hooks run on an event loop (``run_async()``): no blocking wait there.
        self.off_loop = False
        self._stopping = stopping
        self._revoke_timeout_s = revoke_timeout_s
        self._counters = counters
        # Revoked or lost since the last poll returned, and not assigned again since.
        self._gone: set[TopicPartition] = set()
        self._gone_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ExecutorHooks(revoke_timeout_s={self._revoke_timeout_s})"

    def owned(
        self, batch: Mapping[TopicPartition, list[Any]]
    ) -> Mapping[TopicPartition, list[Any]]:
        """``batch`` (what a poll returned) without the records of partitions revoked or lost
        during that poll and not assigned again: they were fetched before the rebalance
        (librdkafka hands out what it collected before serving the revoke, until its fetch
        barrier arrives) and are their new owner's to handle, from the commit. On the polling
        thread, after each poll."""
        with self._gone_lock:
            gone, self._gone = self._gone, set()
        stale = [tp for tp in batch if tp in gone] if gone else []
        if not stale:
            return batch
        if self._counters is not None:
            self._counters.add("revoked_records", sum(len(batch[tp]) for tp in stale))
        log.info("dropped the records a poll returned for %s, revoked during that poll",
                 sorted(stale))
        return {tp: records for tp, records in batch.items() if tp not in gone}

    def _went(self, partitions: set[TopicPartition]) -> None:
        with self._gone_lock:
            self._gone.update(partitions)

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        self._went(partitions)
        if self._stopping.is_set():
            # The consumer is closing: run() already drained and committed.
            self._drop(partitions)
            return
        assigned = self._consumer.assignment()
        mine = self._ledger.tracked(partitions)
        if not mine:
            return
        self.pool.discard(mine)
        if not await self._wait_idle(mine):
            log.warning("revoke: handlers of %s still running after revoke_timeout_ms=%s; "
                        "their records will be consumed again", sorted(mine),
                        int(self._revoke_timeout_s * 1000))
        # Where each partition resumes if it stays ours: its last commit (a commit may have
        # moved past records received here, over done ones it inherited).
        points = self._ledger.restart_points(mine)
        if self._transactions is not None:
            # Their outputs and offsets in one transaction, or (it failed) nothing of theirs
            # since their last commit: whoever takes them on starts from what is committed.
            self._transactions.commit(mine)
            points = self._transactions.restart_points(mine)
            self._transactions.forget(mine)
        done = self._ledger.revoke(mine)
        self.pool.discard(mine)
        if self._transactions is None and done.commit:
            try:
                await self._consumer.commit_async(done.commit)
            except Exception as exc:
                self._ledger.commit_failed(done.commit, exc)
            else:
                self._ledger.committed(done.commit)
                points.update({tp: meta.offset for tp, meta in done.commit.items()})
        # The client keeps the position and pause of a partition that is assigned again (eager
        # rebalance): rewind it (at-least-once: to the watermark, or the commit if that is
        # further; exactly-once: to the last commit, so every output since is made again),
        # so the records dropped from the queue are fetched again, and resume it, as the
        # ledger forgot that it paused it. A partition that left the assignment (cooperative)
        # has neither; its next owner starts from the commit above.
        for tp, watermark in done.rewind.items():
            if tp in assigned:
                if self._transactions is not None:
                    offset = points.get(tp, watermark)
                else:
                    offset = max(watermark, points.get(tp, watermark))
                self._consumer.seek(tp, offset)
        paused = done.paused & assigned
        if paused:
            self._consumer.resume(*paused)

    async def _wait_idle(self, partitions: set[TopicPartition]) -> bool:
        """Wait for the running handlers of ``partitions``: on the worker threads, blocking
        (kafka-python's IO thread), or in a thread when the hook runs on ``run_async()``'s
        loop; async handlers' tasks on that loop are awaited."""
        pool = self.pool
        if isinstance(pool, TaskPool):
            return await pool.wait_idle(partitions, self._revoke_timeout_s)
        if self.off_loop:
            return await asyncio.to_thread(pool.wait_idle, partitions, self._revoke_timeout_s)
        return pool.wait_idle(partitions, self._revoke_timeout_s)

    async def lost(self, partitions: set[TopicPartition]) -> None:
        # The group already gave these partitions away: drop their work, commit nothing.
        self._went(partitions)
        self._drop(partitions)

    async def assigned(self, partitions: set[TopicPartition]) -> None:
        # Work starts as records arrive (the client waits for joins itself). What a poll
        # returns for a partition assigned after its revoke was fetched from its new position.
        with self._gone_lock:
            self._gone.difference_update(partitions)

    def _drop(self, partitions: set[TopicPartition]) -> None:
        self.pool.discard(partitions)
        self._ledger.forget(partitions)
        if self._transactions is not None:
            self._transactions.forget(partitions)
