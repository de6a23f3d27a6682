"""``await executor.run_async()`` and ``async with executor:``: the executor on the caller's loop.

The same loop as :meth:`ShardedExecutor.run` (poll, record in the ledger, queue, pause and
resume, periodic commits, commit on stop; the shared steps are the executor's own methods, the
states, the stop request and the outcome its :class:`~priority_kafka._workers.Lifecycle`'s),
with every consumer call awaited on the running loop instead of blocking a thread, so it
needs a consumer living on that loop: the aiokafka family's (an aio
:class:`~priority_kafka.aio.PriorityConsumer` or an ``AIOKafkaConsumer``), started there.
``async def`` handlers run as tasks of that loop (:class:`~priority_kafka.executor._tasks.
TaskPool`, at most ``async_concurrency`` at once), plain functions on the worker threads.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, cast

from priority_kafka._workers import WorkerPool
from priority_kafka.errors import DeserializationError, IllegalStateError
from priority_kafka.executor._tasks import TaskPool
from priority_kafka.executor._waits import PAUSED_WAIT_S

if TYPE_CHECKING:
    from priority_kafka.executor import ShardedExecutor

__all__ = ["run_on_loop", "start_on_loop", "stop_on_loop"]

log = logging.getLogger("priority_kafka.executor")


def _check(executor: ShardedExecutor) -> None:
    """IllegalStateError, saying why, for what run_async() cannot run."""
    executor._lifecycle.begin(take=False)
    client = executor._consumer
    if not hasattr(client, "poll_async"):
        raise IllegalStateError(
            f"run_async() needs a consumer it can await on the running loop: "
            f"priority_kafka.aio.PriorityConsumer or aiokafka.AIOKafkaConsumer (got "
            f"{type(getattr(client, 'consumer', client)).__name__}). kafka-python's and "
            f"confluent-kafka's poll() blocks its thread and runs the rebalance listener "
            f"inside it, where the executor waits for the running handlers: on the loop it "
            f"would stall every handler; run it on a thread: await asyncio.to_thread("
            f"executor.run)."
        )
    if client.loop is not asyncio.get_running_loop():
        raise IllegalStateError(
            "run_async(): the consumer runs on another event loop than the one awaiting it "
            "(one the aiokafka family started for a synchronous caller, or another thread's); "
            "create and start it on this loop."
        )
    if executor._transactions is not None:
        raise IllegalStateError(
            "run_async() does not run exactly-once: the executor's transactions (begin, the "
            "outputs, send_offsets_to_transaction, commit) wait for each round trip on the "
            "thread that commits, here the event loop every handler runs on, and a "
            "transactional AIOKafkaProducer on this loop cannot be waited for from it; use "
            "await asyncio.to_thread(executor.run) with the consumer and producer on loops of "
            "their own (docs/asyncio.md)."
        )
    if executor._gate is not None and executor._handler.is_async:
        raise IllegalStateError(
            "run_async() with budgets needs a plain def handler: an async handler's record "
            "would wait for its tokens by blocking, here the event loop every handler runs on."
        )


async def run_on_loop(executor: ShardedExecutor) -> None:
    """The body of :meth:`ShardedExecutor.run_async`."""
    _check(executor)
    executor._lifecycle.begin()
    await _run(executor)


async def _run(executor: ShardedExecutor) -> None:
    client = executor._consumer
    stopping = asyncio.Event()  # the loop's side of the lifecycle's: cuts retry waits short
    pool: WorkerPool | TaskPool
    if not executor._handler.is_async:
        pool = cast(WorkerPool, executor._pool)  # a LoopPool is run()'s, for async handlers
    else:
        # The caller's loop instead of run()'s LoopPool (built, never started).
        pool = TaskPool(
            executor._levels.reserved, executor.config.ordering, executor._handler,
            executor._counters, executor.config.async_concurrency or executor.config.shards,
            stopping,
        )
        # The executor's own steps (stats, dispatch, stuck warnings) use only what both have.
        executor._pool = pool  # type: ignore[assignment]
    executor._hooks.pool = pool
    executor._hooks.off_loop = True
    cancelled = False
    try:
        await _start(executor, client, pool)
        try:
            while not executor._lifecycle.stop_requested and not pool.halted:
                await _poll_once(executor, client, pool)
        except asyncio.CancelledError:
            cancelled = True  # drained, committed and closed below, then raised again
        await _shutdown(executor, client, pool, stopping)
    finally:
        await _release(executor, client, pool)
    if cancelled:
        raise asyncio.CancelledError
    executor._raise_outcome()


async def _start(executor: ShardedExecutor, client: Any, pool: WorkerPool | TaskPool) -> None:
    if not executor._subscribed:
        topics = client.subscription()
        if topics:
            executor.subscribe(sorted(topics))  # our listener: revoked partitions committed
        elif not client.assignment():
            raise IllegalStateError(
                "subscribe or assign the consumer (or call executor.subscribe()) before "
                "run_async()."
            )
    if executor._dead_letters is not None:  # a producer of its own starts on its own loop
        executor._handler.dead_letter_producer = await asyncio.to_thread(executor._dead_letters)
    if isinstance(pool, WorkerPool):
        pool.start()


async def _poll_once(executor: ShardedExecutor, client: Any, pool: WorkerPool | TaskPool) -> None:
    timeout, paused = executor._poll_timeout()
    progress = pool.handed_back
    try:
        batch = await client.poll_async(timeout)
    except DeserializationError as error:
        batch = executor._undeserializable(error)
    batch = executor._hooks.owned(batch)  # not what a revoke during the poll gave away
    if batch:
        fresh = executor._fresh(batch)
        if fresh:
            try:
                committed: Any = await client.fetch_committed_on_loop(fresh)
            except Exception as exc:
                committed = exc
            batch = executor._take_on(batch, fresh, committed)
        executor._dispatch(batch)
    elif paused:
        # What ends a pause is the handlers' progress, as in run(); a poll of paused partitions
        # (its timeout 0 once the queue drains fast) answers without suspending.
        budget_s = min(PAUSED_WAIT_S, executor.config.poll_timeout_ms / 1000)
        if isinstance(pool, TaskPool):
            await pool.wait_progress(progress, budget_s)
        else:
            await asyncio.to_thread(pool.wait_progress, progress, budget_s)
    if isinstance(pool, WorkerPool):
        pool.reclaim()  # a record running long must not hold back the rest of its batch
    executor._tend()
    # aiokafka's getmany() returns buffered records (or none) without suspending: without a
    # yield here the handlers' tasks, and aiokafka's own fetches and commits, would wait for a
    # poll that suspends; a paused partition's never did, so its records never ran (livelock).
    await asyncio.sleep(0)


async def _shutdown(
    executor: ShardedExecutor, client: Any, pool: WorkerPool | TaskPool, stopping: asyncio.Event
) -> None:
    executor._lifecycle.stopping.set()
    stopping.set()
    pool.discard()
    budget_s = executor.config.drain_timeout_ms / 1000
    if isinstance(pool, TaskPool):
        idle = await pool.wait_idle(None, budget_s)
    else:
        idle = await asyncio.to_thread(pool.wait_idle, None, budget_s)
    if not idle:
        log.warning("run_async() stopping: handlers still running after drain_timeout_ms=%s "
                    "are cancelled; their records are not committed and will be consumed again",
                    executor.config.drain_timeout_ms)
    # The final commit, awaited (one in flight is superseded: it reaches the same coordinators).
    executor._pending_commit = None
    while True:
        offsets = executor._ledger.committable(client.assignment())
        if not offsets:
            return
        try:
            await client.commit_on_loop(offsets)
        except Exception as exc:
            if executor._commit_refused(offsets, exc):
                continue  # smaller offset maps
            return
        executor._ledger.committed(offsets)
        return


async def _release(executor: ShardedExecutor, client: Any, pool: WorkerPool | TaskPool) -> None:
    executor._lifecycle.closing()
    if isinstance(pool, TaskPool):
        await pool.close()  # handlers past the drain budget: cancelled
    if executor._close_consumer:
        try:
            await client.close_on_loop()
        except Exception:  # closing must not hide the run's own outcome
            log.exception("closing the consumer failed")
    if executor._handler.dead_letter_producer is not None:
        await asyncio.to_thread(executor._handler.dead_letter_producer.close)
    if isinstance(pool, WorkerPool):
        await asyncio.to_thread(pool.close)  # a handler stuck past the drain keeps its daemon


def start_on_loop(executor: ShardedExecutor) -> asyncio.Task[None]:
    """``async with executor:``: :meth:`~ShardedExecutor.run_async` as a task of the running
    loop, after checking at once what it would refuse."""
    _check(executor)
    executor._lifecycle.begin()  # now: a run_async() awaited meanwhile is refused, not this
    return asyncio.get_running_loop().create_task(_run(executor), name="priority-kafka-executor")


async def stop_on_loop(executor: ShardedExecutor, task: asyncio.Task[None]) -> None:
    """The end of ``async with executor:``: stop, and wait until drained, committed and
    closed (raising what the run raised)."""
    executor.stop()
    await task
