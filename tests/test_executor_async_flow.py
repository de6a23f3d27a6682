"""run_async(): the executor's poll loop shares the caller's loop with the handlers' tasks, real
broker.

aiokafka's ``getmany(timeout_ms=0)`` returns without suspending while records are buffered (or
none are to be had), so a poll loop that never suspended would keep every handler task (and
aiokafka's own fetches and commits) from running. These tests hold the loop to account where
that bit: a partition paused at ``max_in_flight_per_partition`` with its records in tasks that
had not started, polled with timeout 0 (nothing queued) and answered at once, so the loop never
yielded and they never ran (a livelock, found by the broker restart fault test on the aio
family). Now the poll loop yields after every poll and, while paused, waits for the handlers'
progress as ``run()`` does. The run is watched from another thread: a loop that never yields
cannot time itself out.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import pytest

from priority_kafka.executor import ShardedExecutor
from tests.test_executor import committed
from tests.test_executor_async import one_level_consumer, one_level_topic

pytestmark = pytest.mark.integration

#: Longest a run may take (a loaded machine); a livelocked one is stopped from outside then.
_WAIT_S = 90


def run_watched(bootstrap: str, topic: str, group: str, total: int, handler_s: float,
                **options: Any) -> dict[str, Any]:
    """An async handler awaiting ``handler_s`` over ``total`` records, with ``run_async()`` in
    ``asyncio.run`` on a thread; stopped once all are handled, or from this thread after
    ``_WAIT_S`` (the loop never yielding): what happened, and how many polls it made."""
    seen: dict[str, Any] = {"handled": 0, "polls": 0, "in_order": True}
    all_done = threading.Event()
    box: dict[str, Any] = {}
    last: dict[bytes, int] = {}

    async def main() -> None:
        consumer = await one_level_consumer(bootstrap, topic, group)

        async def handler(record: Any) -> None:
            await asyncio.sleep(handler_s)
            if record.offset <= last.get(record.key, -1):
                seen["in_order"] = False
            last[record.key] = record.offset
            seen["handled"] += 1
            if seen["handled"] == total:
                all_done.set()

        executor = box["executor"] = ShardedExecutor(consumer, handler, **options)
        client = executor._consumer
        poll_async = client.poll_async

        async def counted(timeout_ms: float) -> Any:
            seen["polls"] += 1
            return await poll_async(timeout_ms)

        client.poll_async = counted
        await executor.run_async()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    finished = all_done.wait(_WAIT_S)
    box["executor"].stop()  # from this thread: also ends a loop that never yields
    thread.join(_WAIT_S)
    assert not thread.is_alive(), "run_async() did not stop"
    assert finished, f"not every record handled within {_WAIT_S} s: {seen}"
    return seen


def test_a_paused_partition_s_records_run_and_the_poll_loop_waits_for_them_not_spins(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """400 records, 10 in flight at most and 10 tasks (so nothing queued while paused), each
    handler awaiting 20 ms: every record handled in key order (it livelocked at the first
    pause), and polling waits for the handlers' progress (at most 10 ms a wait, as ``run()``),
    so the loop polls about once per handler end, not tens of thousands of times."""
    topic, group = one_level_topic(bootstrap_servers, unique_name, "async-paused", 400, 400)
    seen = run_watched(bootstrap_servers, topic, group, 400, 0.02,
                       async_concurrency=10, max_in_flight_per_partition=10)
    assert seen["handled"] == 400 and seen["in_order"]
    assert list(committed(bootstrap_servers, f"{group}-0").values()) == [400]
    # Waiting: about one poll per record ended plus one per 10 ms paused (~1,000); spinning
    # made tens of thousands.
    assert seen["polls"] < 5000, seen


def test_a_handler_that_never_suspends_still_lets_the_loop_run_between_its_records(
    bootstrap_servers: str, unique_name: Any
) -> None:
    """A task that ended a record takes the next one itself (no new task per record); when the
    handler never suspended, it yields to the loop first, as a new task would have: another
    task of the loop (a ticker, here; the poll loop and a stop in an application) runs between
    any two records of one running slot."""
    total = 300
    topic, group = one_level_topic(bootstrap_servers, unique_name, "async-busy", total, 7)
    ticks_seen: list[int] = []

    async def main() -> None:
        consumer = await one_level_consumer(bootstrap_servers, topic, group)
        ticks = [0]
        done = asyncio.Event()

        async def ticker() -> None:
            while True:
                ticks[0] += 1
                await asyncio.sleep(0)

        async def handler(record: Any) -> None:  # no await: never suspends
            ticks_seen.append(ticks[0])
            if len(ticks_seen) == total:
                done.set()

        ticking = asyncio.create_task(ticker())
        try:
            async with ShardedExecutor(consumer, handler, async_concurrency=1):
                await asyncio.wait_for(done.wait(), _WAIT_S)
        finally:
            ticking.cancel()

    asyncio.run(main())
    assert len(ticks_seen) == total
    repeats = sum(1 for a, b in itertools.pairwise(ticks_seen) if a == b)
    assert repeats == 0, f"{repeats} records ran right after the one before, the loop held"
