"""ShardedExecutor with budgets, on the kafka-python PriorityConsumer against the real broker."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks._running import Running, wait_for
from priority_kafka import create_priority_topics
from priority_kafka.budgets import Budget, Budgets, Throttled
from priority_kafka.errors import ConfigError
from priority_kafka.executor import ShardedExecutor
from priority_kafka.metrics import Metrics
from tests.test_executor import loaded_topic, priority_consumer, produce_levels, spawn_child


def loaded(bootstrap: str, unique_name: Callable[[str], str], counts: dict[int, int],
           keys: int = 10) -> tuple[str, str]:
    """A new logical topic holding ``counts[level]`` records per level, and a new group."""
    topic, group = unique_name("budget"), unique_name("g")
    create_priority_topics(bootstrap, topic, 3)
    produce_levels(bootstrap, topic, counts, keys=keys)
    return topic, group


def most_in_a_window(times: list[float], window: float = 1.0) -> int:
    times = sorted(times)
    best = j = 0
    for i, t in enumerate(times):
        while times[j] <= t - window:
            j += 1
        best = max(best, i - j + 1)
    return best


@pytest.mark.integration
def test_budget_keeps_the_rate_and_order_and_serves_the_high_level_first(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    topic, group = loaded(bootstrap_servers, unique_name, {0: 400, 2: 40})
    calls: list[float] = []
    seen: dict[tuple[int, str], list[int]] = defaultdict(list)
    lock = threading.Lock()

    def handler(record: Any) -> None:
        level, key, seq = record.value.decode().split(":")
        with lock:
            calls.append(time.monotonic())
            seen[(int(level), key)].append(int(seq))

    executor = ShardedExecutor(
        priority_consumer(bootstrap_servers, topic, group), handler, shards=4,
        budgets=Budgets({"api": Budget(100, burst=2)}),
    )
    run = Running(executor)
    try:
        wait_for(lambda: len(calls) >= 440, 60, "440 records")
    finally:
        run.stop()
    with lock:
        assert all(seqs == list(range(len(seqs))) for seqs in seen.values()), seen
        assert sum(map(len, seen.values())) == 440  # each once
        peak = most_in_a_window(calls)
    # The bucket bounds grants to rate + burst per second; the workers' pick-up adds jitter.
    assert peak <= 100 * 1.1 + 2, peak
    stats = executor.budget_stats()["api"]
    assert {level: s.records for level, s in stats.items()} == {2: 40, 1: 0, 0: 400}
    assert sum(s.tokens for s in stats.values()) == 440
    assert all(s.waiting == 0 for s in stats.values())
    # Level 2 takes the next token: its records waited far less than the flood's.
    assert stats[2].wait_s / 40 < stats[0].wait_s / 400 / 5, stats
    families = {name: samples for name, _, _, samples in Metrics(executor=executor).families()}
    assert ({"resource": "api", "level": "0"}, 400) in families[
        "priority_kafka_budget_granted_total"]
    assert ({"resource": "api", "level": "2"}, 0) in families[
        "priority_kafka_budget_waiting_records"]


@pytest.mark.integration
def test_a_throttle_pauses_and_spends_no_attempt_and_keeps_order(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    topic, group = loaded(bootstrap_servers, unique_name, {1: 60}, keys=1)
    seen: list[int] = []
    throttled_at: list[float] = []
    lock = threading.Lock()

    def handler(record: Any) -> Any:
        seq = int(record.value.decode().split(":")[2])
        with lock:
            if seq == 10 and len(throttled_at) < 2:
                throttled_at.append(time.monotonic())
                if len(throttled_at) == 1:
                    raise Throttled(retry_after=0.5)
                return Throttled(retry_after=0.5)  # returned works too
            seen.append(seq)
        return None

    executor = ShardedExecutor(
        priority_consumer(bootstrap_servers, topic, group), handler, shards=2,
        max_attempts=1, budgets=Budgets({"api": 200}),
    )
    run = Running(executor)
    try:
        wait_for(lambda: len(seen) >= 60, 60, "60 records")
    finally:
        run.stop()
    assert seen == list(range(60))  # nothing lost, the lane's order kept, no dead letter
    assert throttled_at[1] - throttled_at[0] >= 0.5  # paused for retry_after
    stats = executor.stats()
    assert stats.retries == 0 and stats.failed == 0 and stats.handled == 60
    budget = executor.budget_stats()["api"][1]
    assert budget.throttles == 2
    assert budget.rate < 200  # lowered, growing back as calls succeed


def test_budgets_must_be_a_budgets() -> None:
    from tests.fakes import FakeConsumer

    with pytest.raises(ConfigError, match="'budgets' must be a Budgets"):
        ShardedExecutor(FakeConsumer({}), print, budgets={"api": 10})  # type: ignore[arg-type]


def test_most_in_a_window() -> None:
    assert most_in_a_window([0.0, 0.5, 0.99, 1.0, 1.5]) == 3


@pytest.mark.integration
def test_two_executors_in_one_group_share_one_budget(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    """Each takes the part of each level's budget its assigned partitions carry: two members
    with half the partitions each spend the budget together, not twice, each its half.

    The span is the time the two take for 300 calls together (an event), not a fixed sleep:
    a floor on the calls of a fixed span failed once at load (14/s against a floor of 60/s:
    a starved process's gates wake late and lose the tokens past ``catch_up_s``), which is
    the machine, not the division; how close to the budget the two come is the benchmark's
    figure (docs/budgets.md). A late gate only slows the calls down, so the ceiling holds at
    any load, and both members' gates starve alike, so each makes about half."""
    topic, group = unique_name("budget-group"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, 3, num_partitions=4)
    # Enough backlog on every partition to outlast the joins and the measured span at 100/s.
    produce_levels(bootstrap_servers, topic, {0: 12000}, keys=40)
    calls: list[tuple[float, int]] = []
    lock = threading.Lock()
    counting = [False]
    done = threading.Event()

    def handler_of(member: int) -> Callable[[Any], None]:
        def handler(record: Any) -> None:
            with lock:
                calls.append((time.monotonic(), member))
                if counting[0] and len(calls) >= 300:
                    done.set()
        return handler

    executors = [
        ShardedExecutor(priority_consumer(bootstrap_servers, topic, group), handler_of(member),
                        shards=2, budgets=Budgets({"api": Budget(100, burst=2)}))
        for member in range(2)
    ]
    for executor in executors:
        executor.subscribe([topic])
    runs = [Running(executor) for executor in executors]
    try:
        def halves() -> bool:
            rates = [e.budget_stats()["api"][0].rate for e in executors]
            return all(rate == pytest.approx(50) for rate in rates)

        wait_for(halves, 60, "each member to hold half of level 0's partitions")
        # A rebalance starts the lending windows over: wait until level 0 borrows again.
        wait_for(lambda: all(e.budget_stats()["api"][0].borrowing for e in executors), 30,
                 "level 0 to borrow the idle levels' share on both members")
        with lock:
            calls.clear()
            counting[0] = True
            start = time.monotonic()
        assert done.wait(60), len(calls)
        assert halves()  # no rebalance during the span
        assert all(e.budget_stats()["api"][0].borrowing for e in executors)
    finally:
        for run in runs:
            run.stop()
    with lock:
        span = calls[:300]
    elapsed = span[-1][0] - start
    mine = sum(1 for _, member in span if member == 0)
    print(f"two members, budget 100/s: 300 calls in {elapsed:.2f} s = {300 / elapsed:.1f}/s, "
          f"{mine} and {300 - mine} by each")
    assert 100 * elapsed * 1.05 + 4 >= 300, elapsed  # together, not twice the budget
    assert 105 <= mine <= 195, mine  # each its half (35-65 % of the calls)


@pytest.mark.integration
def test_kill_9_with_budgets_loses_nothing_and_keeps_order(
    bootstrap_servers: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """SIGKILL three times while records wait for their budget, then finish: every record
    handled, and each process handles each partition's records in offset order (a restart
    goes back to the last commit, so the order restarts at most once per kill)."""
    count, partitions, kills = 3000, 3, 3
    topic, group = loaded_topic(bootstrap_servers, unique_name, "crash", count, partitions)
    out = tmp_path / "handled.txt"
    out.touch()
    budget = ("--budget", "1500")

    def lines() -> list[str]:
        return out.read_text().splitlines()

    children = [spawn_child(bootstrap_servers, topic, group, out, extra=budget)]
    try:
        for kill in range(kills):
            target = len(lines()) + random.randint(300, 600)
            wait_for(lambda target=target: len(lines()) >= target, 60, f"kill {kill}")
            children[-1].send_signal(signal.SIGKILL)
            children.append(spawn_child(bootstrap_servers, topic, group, out, extra=budget))
        wait_for(lambda: len(set(lines())) >= count, 120, "all records")
        children[-1].send_signal(signal.SIGTERM)
        assert children[-1].wait(30) == 0
    finally:
        for child in children:  # none left behind, whatever failed
            if child.poll() is None:
                child.kill()
            child.wait(10)
    handled = lines()
    assert set(handled) == {f"{i % partitions} {i // partitions}" for i in range(count)}
    last: dict[str, int] = {}
    restarts: Counter[str] = Counter()
    for line in handled:
        partition, offset = line.split()
        if int(offset) <= last.get(partition, -1):
            restarts[partition] += 1
        last[partition] = int(offset)
    assert all(n <= kills for n in restarts.values()), restarts
    print(f"kill -9 x{kills} with budgets: 0 lost, {len(handled) - count} duplicates, "
          f"order restarts per partition {dict(restarts)}")


def test_a_throttled_record_closed_while_waiting_is_abandoned_not_failed() -> None:
    """At stop, a record still waiting for a token after a throttle is abandoned (it comes
    again after a restart), never dead-lettered or failed, even with max_attempts=1."""
    from priority_kafka._workers import Outcome, RecordHandler
    from priority_kafka.config import ExecutorConfig

    stopping = threading.Event()
    stopping.set()
    handler = RecordHandler(print, ExecutorConfig(max_attempts=1), on_failure=None,
                            stopping=stopping, count=lambda *_: None)
    result = handler.process(None, ("t", 0, 0), Throttled(message="closed while waiting"))
    assert result.outcome is Outcome.ABANDONED and not result.outcome.done


@pytest.mark.integration
def test_while_paused_the_polling_thread_waits_in_the_poll_not_in_a_spin(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    """With a partition paused and the gate holding its records, the workers are fed at the
    budget's pace without the polling thread: each poll waits (on the highest level, which a
    level-2 record wakes at once) instead of returning at once. With a timeout of 0 the thread
    spun (17,000 polls a second in the benchmark) and a level-2 record waited for a later
    poll of its level (9.4 ms p50 from its append at the broker)."""
    topic, group = loaded(bootstrap_servers, unique_name, {0: 200})
    handled = threading.Event()
    calls = [0]

    def handler(record: Any) -> None:
        calls[0] += 1
        if calls[0] >= 60:
            handled.set()

    executor = ShardedExecutor(
        priority_consumer(bootstrap_servers, topic, group), handler, shards=2,
        budgets=Budgets({"api": 100}), max_in_flight_per_partition=20,
    )
    gate = executor._gate
    assert gate is not None
    polls: list[tuple[float, int]] = []  # each poll's timeout, and the gate's records then
    consumer = executor._consumer

    class Watched:
        def __getattr__(self, name: str) -> Any:
            return getattr(consumer, name)

        def poll(self, timeout_ms: float = 0, **kwargs: Any) -> Any:
            polls.append((timeout_ms, gate.waiting()))
            return consumer.poll(timeout_ms=timeout_ms, **kwargs)

    executor._consumer = Watched()
    run = Running(executor)
    try:
        assert handled.wait(60), calls
    finally:
        run.stop()
    held = [timeout for timeout, waiting in polls if waiting >= 2]
    assert held, polls[:20]  # the gate held records (the partition paused at 20 in flight)
    assert not [t for t in held if t == 0], (len(held), sum(1 for t in held if t == 0))
