"""ShardedExecutor with budgets on priority_kafka.confluent.PriorityConsumer (real broker)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from helpers import consumer, produce, run_in_thread

from priority_kafka import ShardedExecutor
from priority_kafka.budgets import Budget, Budgets, Throttled

pytestmark = pytest.mark.integration


def test_budget_on_the_confluent_family(bootstrap_servers: str, topic: str) -> None:
    """The same gate as kafka-python: every record once, in partition order, at the rate,
    level 2 ahead of the flood, a throttle spending no attempt."""
    produce(bootstrap_servers, topic, {0: 200, 2: 20})
    calls: list[float] = []
    seen: dict[int, list[int]] = defaultdict(list)
    lock = threading.Lock()
    throttled = threading.Event()

    def handle(record: Any) -> None:
        level, seq = map(int, record.value.decode().split(":"))
        with lock:
            if level == 0 and seq == 5 and not throttled.is_set():
                throttled.set()
                raise Throttled(retry_after=0.2)
            calls.append(time.monotonic())
            seen[level].append(seq)

    executor = ShardedExecutor(
        consumer(bootstrap_servers, "budget", **{"enable.auto.commit": False}), handle,
        shards=4, ordering="partition", max_attempts=1,
        budgets=Budgets({"api": Budget(100, burst=2)}),
    )
    executor.subscribe([topic])
    failures: list[BaseException] = []
    thread = run_in_thread(executor, failures)
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, seen.values())) < 220:
            assert time.monotonic() < deadline and thread.is_alive(), executor.stats()
            time.sleep(0.05)
    finally:
        executor.stop()
        thread.join(60)
    assert not failures, failures
    assert seen[0] == list(range(200)) and seen[2] == list(range(20))
    times = sorted(calls)
    peak = max(sum(1 for u in times if t - 1.0 < u <= t) for t in times)
    assert peak <= 100 * 1.1 + 2, peak
    stats = executor.budget_stats()["api"]
    assert stats[0].throttles == 1 and executor.stats().retries == 0
    assert stats[2].wait_s / 20 < stats[0].wait_s / 200, stats


def test_while_paused_the_polling_thread_waits_in_the_poll(
    bootstrap_servers: str, topic: str
) -> None:
    """As on kafka-python: with a partition paused and the gate holding its records, each
    poll waits (a higher level's record wakes it) instead of returning at once in a spin."""
    produce(bootstrap_servers, topic, {0: 200})
    handled = threading.Event()
    calls = [0]

    def handle(record: Any) -> None:
        calls[0] += 1
        if calls[0] >= 60:
            handled.set()

    executor = ShardedExecutor(
        consumer(bootstrap_servers, "budget", **{"enable.auto.commit": False}), handle,
        shards=2, budgets=Budgets({"api": 100}), max_in_flight_per_partition=20,
    )
    executor.subscribe([topic])
    gate = executor._gate
    assert gate is not None
    polls: list[tuple[float, int]] = []  # each poll's timeout, and the gate's records then
    client = executor._consumer

    class Watched:
        def __getattr__(self, name: str) -> Any:
            return getattr(client, name)

        def poll(self, timeout_ms: float = 0, **kwargs: Any) -> Any:
            polls.append((timeout_ms, gate.waiting()))
            return client.poll(timeout_ms=timeout_ms, **kwargs)

    executor._consumer = Watched()
    failures: list[BaseException] = []
    thread = run_in_thread(executor, failures)
    try:
        assert handled.wait(60), calls
    finally:
        executor.stop()
        thread.join(60)
    assert not failures, failures
    held = [timeout for timeout, waiting in polls if waiting >= 2]
    assert held, polls[:20]  # the gate held records (the partition paused at 20 in flight)
    assert not [t for t in held if t == 0], (len(held), sum(1 for t in held if t == 0))
