"""Tests of priority_kafka.scheduling: lane order, and level shares simulated without threads."""

from __future__ import annotations

import heapq
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from priority_kafka.errors import ConfigError
from priority_kafka.scheduling import LaneQueue, LevelShares, Task


def simulate(
    queue: LaneQueue[tuple[int, int]],
    workers: int,
    duration: dict[int, float],
    runs: int,
) -> Counter[int]:
    """Run ``runs`` records on ``workers`` simulated workers; return handler time per level
    up to the end of the run, the records still running included (counting only finished
    records would under-count a level of long records by up to ``workers`` of them).

    Every finished record is replaced by a new one on the same lane, so backlogs stay.
    """
    used: Counter[int] = Counter()
    running: list[tuple[float, int, Task[tuple[int, int]]]] = []
    now, seq = 0.0, 0
    for _ in range(runs):
        while len(running) < workers and (task := queue.next()) is not None:
            seq += 1
            heapq.heappush(running, (now + duration[task.level], seq, task))
        if not running:
            break
        now, _, task = heapq.heappop(running)
        used[task.level] += duration[task.level]
        queue.finish(task, duration[task.level])
        level, n = task.item
        queue.push(level, (level, n % 50), (level, n + 1000))
    for end, _, task in running:
        used[task.level] += duration[task.level] - (end - now)
    return used


def backlogged(weights: dict[int, float], per_level: int = 500) -> LaneQueue[tuple[int, int]]:
    """A queue with ``per_level`` records on 50 lanes of every level."""
    queue: LaneQueue[tuple[int, int]] = LaneQueue(weights)
    for level in weights:
        for n in range(per_level):
            queue.push(level, (level, n % 50), (level, n))
    return queue


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(1, 60), min_size=2, max_size=4),
    st.lists(st.floats(0.001, 0.05), min_size=4, max_size=4),
    st.integers(1, 32),
)
def test_backlogged_levels_get_their_share(
    quotas: list[int], durations: list[float], workers: int
) -> None:
    """With every level backlogged, each level's handler-time share is within 3% of its weight."""
    weights = {level: float(q) for level, q in enumerate(quotas)}
    duration = {level: durations[level] for level in weights}
    used = simulate(backlogged(weights), workers, duration, runs=5000)
    total = sum(used.values())
    for level, weight in weights.items():
        assert used[level] / total == pytest.approx(weight / sum(weights.values()), abs=0.03)


def test_a_newly_ready_high_level_runs_at_the_next_free_slot() -> None:
    """A high-priority record queued behind a long low-priority backlog is the very next to run."""
    queue: LaneQueue[str] = LaneQueue({2: 29, 1: 14, 0: 7})
    for n in range(1000):
        queue.push(0, ("low", n % 10), f"low-{n}")
    tasks = [queue.next() for _ in range(8)]
    for task in tasks[:5]:
        assert task is not None
        queue.finish(task, 0.01)
    queue.push(2, ("high", 0), "high")
    task = queue.next()
    assert task is not None and task.item == "high"


def test_an_idle_level_banks_no_credit() -> None:
    """A level idle while another ran long does not then monopolise the workers."""
    weights = {1: 1.0, 0: 1.0}
    queue: LaneQueue[tuple[int, int]] = LaneQueue(weights)
    for n in range(200):
        queue.push(1, (1, n % 50), (1, n))
    simulate(queue, 4, {1: 0.01, 0: 0.01}, runs=5000)  # level 1 alone used a lot of time
    for n in range(200):
        queue.push(0, (0, n % 50), (0, n))
    used = simulate(queue, 4, {1: 0.01, 0: 0.01}, runs=2000)
    assert used[0] / sum(used.values()) == pytest.approx(0.5, abs=0.05)


def test_lane_records_run_one_at_a_time_in_push_order() -> None:
    """A lane's next record is not handed out while one of its records is running."""
    queue: LaneQueue[int] = LaneQueue({0: 1})
    for n in range(3):
        queue.push(0, "lane", n)
    first = queue.next()
    assert first is not None and first.item == 0
    assert queue.next() is None
    queue.finish(first, 0.0)
    second = queue.next()
    assert second is not None and second.item == 1
    assert (queue.queued, queue.running) == (1, 1)


@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=200), st.randoms())
def test_random_schedules_keep_every_lane_in_order(
    pushes: list[tuple[int, bool]], rnd: random.Random
) -> None:
    """Under random push/next/finish interleavings, each lane runs in push order, one at a time."""
    queue: LaneQueue[tuple[int, int]] = LaneQueue({1: 3, 0: 1})
    seen: dict[int, list[int]] = {}
    running: list[Task[tuple[int, int]]] = []
    for n, (lane, high) in enumerate(pushes):
        queue.push(int(high), lane * 2 + int(high), (lane * 2 + int(high), n))
        if rnd.random() < 0.5 and (task := queue.next()) is not None:
            assert all(t.lane != task.lane for t in running)
            running.append(task)
        if running and rnd.random() < 0.5:
            done = running.pop(rnd.randrange(len(running)))
            seen.setdefault(done.item[0], []).append(done.item[1])
            queue.finish(done, rnd.random())
    while running or queue.queued:
        while (task := queue.next()) is not None:
            assert all(t.lane != task.lane for t in running)
            running.append(task)
        done = running.pop(rnd.randrange(len(running)))
        seen.setdefault(done.item[0], []).append(done.item[1])
        queue.finish(done, rnd.random())
    assert sum(len(v) for v in seen.values()) == len(pushes)
    assert all(order == sorted(order) for order in seen.values())


def test_discard_drops_queued_records_only() -> None:
    """discard removes matching queued records; the running one and the rest stay."""
    queue: LaneQueue[tuple[str, int]] = LaneQueue({0: 1})
    for n in range(4):
        queue.push(0, ("a" if n % 2 else "b"), ("a" if n % 2 else "b", n))
    running = queue.next()
    assert running is not None and running.item == ("b", 0)
    dropped = queue.discard(lambda item: item[0] == "b")
    assert dropped == [("b", 2)]
    assert queue.queued == 2
    queue.finish(running, 0.0)
    items = []
    while (task := queue.next()) is not None:
        items.append(task.item)
        queue.finish(task, 0.0)
    assert items == [("a", 1), ("a", 3)]


def test_zero_weight_level_runs_only_when_others_are_idle() -> None:
    """A level of weight 0 yields to every weighted level."""
    queue: LaneQueue[str] = LaneQueue({1: 1, 0: 0})
    queue.push(0, "z", "zero")
    queue.push(1, "o", "one")
    first = queue.next()
    assert first is not None and first.item == "one"
    second = queue.next()
    assert second is not None and second.item == "zero"


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({}, "'weights' must name at least one level"),
        ({0: -1}, "weight of level 0 must be a number >= 0"),
        ({0: 0}, "at least one level needs a positive weight"),
        ({-1: 1}, "'level' must be at least 0"),
    ],
)
def test_bad_weights_are_rejected(weights: dict[int, float], message: str) -> None:
    """Invalid weights fail with a ConfigError naming the problem."""
    with pytest.raises(ConfigError, match=message):
        LevelShares(weights)


def test_unknown_level_is_rejected() -> None:
    """Pushing to a level without a weight is a ConfigError naming the known levels."""
    with pytest.raises(ConfigError, match=r"level 5 has no weight \(levels: \[0, 1\]\)"):
        LaneQueue({0: 1, 1: 1}).push(5, "lane", "x")


def test_shares_are_normalised_highest_first() -> None:
    """shares() gives each level's fraction of handler time, highest level first."""
    assert list(LevelShares({0: 7, 1: 14, 2: 29}).shares().items()) == [
        (2, 29 / 50), (1, 14 / 50), (0, 7 / 50)
    ]
