"""The executor's rebalance hooks: finish and commit revoked partitions, drop lost ones.

They run where the consumer runs its listener: kafka-python on its IO thread while the polling
thread waits inside ``poll()``. So they may not call a blocking consumer method: the revoke
commit is ``commit_async`` awaited in place (it completes before the group rejoins, while the
partitions are still ours).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from priority_kafka._kafka import POSITION_SURVIVES_REASSIGNMENT, TopicPartition
from priority_kafka.executor._ledger import PartitionLedger
from priority_kafka.executor._pool import WorkerPool

__all__ = ["ExecutorHooks"]

log = logging.getLogger("priority_kafka.executor")


class ExecutorHooks:
    """:class:`~priority_kafka._rebalance.RebalanceHooks` of a ShardedExecutor.

    ``stopping`` is set once ``run()`` began shutting down.
    """

    def __init__(
        self,
        consumer: Any,
        ledger: PartitionLedger,
        pool: WorkerPool,
        *,
        stopping: threading.Event,
        revoke_timeout_s: float,
    ) -> None:
        self._consumer = consumer
        self._ledger = ledger
        self._pool = pool
        self._stopping = stopping
        self._revoke_timeout_s = revoke_timeout_s

    def __repr__(self) -> str:
        return f"ExecutorHooks(revoke_timeout_s={self._revoke_timeout_s})"

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        if self._stopping.is_set():
            # The consumer is closing: run() already drained and committed.
            self._drop(partitions)
            return
        assigned = self._consumer.assignment()
        mine = self._ledger.tracked(partitions)
        if not mine:
            return
        self._pool.discard(mine)
        if not self._pool.wait_idle(mine, self._revoke_timeout_s):
            log.warning("revoke: handlers of %s still running after revoke_timeout_ms=%s; "
                        "their records will be consumed again", sorted(mine),
                        int(self._revoke_timeout_s * 1000))
        done = self._ledger.revoke(mine)
        self._pool.discard(mine)
        committed = False
        if done.commit:
            try:
                await self._consumer.commit_async(done.commit)
            except Exception as exc:
                self._ledger.commit_failed(done.commit, exc)
            else:
                committed = True
                self._ledger.committed(done.commit)
        # The client keeps the position and pause of a partition that is assigned again (eager
        # rebalance): rewind it to what was just committed (or, failing that, the watermark),
        # so the records dropped from the queue are fetched again, and resume it, as the ledger
        # forgot that it paused it. A partition that left the assignment (cooperative) has
        # neither; its next owner starts from the commit above.
        if POSITION_SURVIVES_REASSIGNMENT:
            for tp, offset in done.rewind.items():
                if tp in assigned:
                    if committed and tp in done.commit:
                        offset = max(offset, done.commit[tp].offset)
                    self._consumer.seek(tp, offset)
        paused = done.paused & assigned
        if paused:
            self._consumer.resume(*paused)

    async def lost(self, partitions: set[TopicPartition]) -> None:
        # The group already gave these partitions away: drop their work, commit nothing.
        self._drop(partitions)

    async def assigned(self, partitions: set[TopicPartition]) -> None:
        # Nothing to do: work starts as records arrive (the client waits for joins itself).
        return None

    def _drop(self, partitions: set[TopicPartition]) -> None:
        self._pool.discard(partitions)
        self._ledger.forget(partitions)
