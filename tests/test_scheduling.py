"""Tests of priority_kafka.scheduling: lane order, and level shares simulated without threads."""

from __future__ import annotations

import heapq
import random
from collections import Counter
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from priority_kafka.errors import ConfigError
from priority_kafka.scheduling import Batch, LaneQueue, LevelShares


class Item(NamedTuple):
    """A queued record: ``key`` picks its lane (in "key" order)."""

    key: object
    level: int
    n: int


GROUP = object()  # what completions count towards; the queue only hands it back


def push(queue: LaneQueue, level: int, key: object, n: int, source: object = None) -> None:
    queue.push(level, level if source is None else source, GROUP, [Item(key, level, n)])


def take_one(queue: LaneQueue) -> Batch | None:
    return queue.take(1)


def started(batch: Batch, count: int | None = None) -> list[Item]:
    """What a worker does with a batch: take its records (the first ``count``; None: all)."""
    records = batch.records
    return [records.popleft() for _ in range(len(records) if count is None else count)]


def item(batch: Batch) -> Item:
    (only,) = started(batch)
    return only


def simulate(queue: LaneQueue, workers: int, duration: dict[int, float], runs: int) -> Counter[int]:
    """Run ``runs`` records on ``workers`` simulated workers, one record a batch; return handler
    time per level up to the end of the run, the records still running included (counting only
    finished records would under-count a level of long records by up to ``workers`` of them).

    Every finished record is replaced by a new one on the same lane, so backlogs stay.
    """
    used: Counter[int] = Counter()
    running: list[tuple[float, int, Batch, Item]] = []
    now, seq = 0.0, 0
    for _ in range(runs):
        while len(running) < workers and (batch := take_one(queue)) is not None:
            seq += 1
            heapq.heappush(running, (now + duration[batch.level], seq, batch, item(batch)))
        if not running:
            break
        now, _, batch, done = heapq.heappop(running)
        used[batch.level] += duration[batch.level]
        queue.finish(batch, duration[batch.level])
        push(queue, done.level, done.key, done.n + 1000)
    for end, _, batch, _ in running:
        used[batch.level] += duration[batch.level] - (end - now)
    return used


def backlogged(weights: dict[int, float], per_level: int = 500) -> LaneQueue:
    """A queue with ``per_level`` records on 50 lanes of every level."""
    queue = LaneQueue(weights)
    for level in weights:
        for n in range(per_level):
            push(queue, level, n % 50, n)
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
    queue = LaneQueue({2: 29, 1: 14, 0: 7})
    for n in range(1000):
        push(queue, 0, n % 10, n)
    batches = [take_one(queue) for _ in range(8)]
    for batch in batches[:5]:
        assert batch is not None
        started(batch)
        queue.finish(batch, 0.01)
    push(queue, 2, "high", 0)
    batch = take_one(queue)
    assert batch is not None and item(batch) == Item("high", 2, 0)


def test_an_idle_level_banks_no_credit() -> None:
    """A level idle while another ran long does not then monopolise the workers."""
    weights = {1: 1.0, 0: 1.0}
    queue = LaneQueue(weights)
    for n in range(200):
        push(queue, 1, n % 50, n)
    simulate(queue, 4, {1: 0.01, 0: 0.01}, runs=5000)  # level 1 alone used a lot of time
    for n in range(200):
        push(queue, 0, n % 50, n)
    used = simulate(queue, 4, {1: 0.01, 0: 0.01}, runs=2000)
    assert used[0] / sum(used.values()) == pytest.approx(0.5, abs=0.05)


def test_lane_records_run_one_at_a_time_in_push_order() -> None:
    """A lane's next record is not handed out while a worker holds one of its records."""
    queue = LaneQueue({0: 1})
    for n in range(3):
        push(queue, 0, "lane", n)
    first = take_one(queue)
    assert first is not None and item(first).n == 0
    assert take_one(queue) is None
    assert queue.finish(first, 0.0) == 1
    second = take_one(queue)
    assert second is not None and item(second).n == 1
    assert (queue.queued, queue.taken) == (1, 1)


def test_a_batch_takes_lanes_in_turn_up_to_the_limit() -> None:
    """take(n) gives up to n records of one level, whole lanes first, each lane's in order;
    the lanes taken wait until the batch is handed back."""
    queue = LaneQueue({1: 1, 0: 1})
    for n in range(6):
        push(queue, 0, n % 2, n)
    push(queue, 1, "high", 0)
    batch = queue.take(lambda level: 4)
    assert batch is not None and batch.level == 1 and batch.count == 1
    low = queue.take(5)
    assert low is not None and low.level == 0
    assert [i.n for i in low.records] == [0, 2, 4, 1, 3]
    assert [count for _, _, count in low.runs] == [3, 2]
    assert queue.take(5) is None  # lane 1 still has record 5, but a worker holds the lane
    started(low)
    assert queue.finish(low, 0.001) == 5
    rest = queue.take(5)
    assert rest is not None and [i.n for i in rest.records] == [5]


def test_records_not_started_go_back_to_the_head_of_their_lane() -> None:
    """A batch handed back with a stop point returns the rest, in order, before newer records."""
    queue = LaneQueue({0: 1}, ordering="partition")
    for n in range(4):
        push(queue, 0, None, n, source="p")
    batch = queue.take(3)
    assert batch is not None and batch.count == 3
    push(queue, 0, None, 4, source="p")
    assert [i.n for i in started(batch, 1)] == [0]
    assert queue.finish(batch, 0.01) == 1
    rest = queue.take(10)
    assert rest is not None and [i.n for i in rest.records] == [1, 2, 3, 4]


def test_a_stuck_workers_batch_is_stolen_back_lane_by_lane() -> None:
    """steal() returns the records a worker has not started: lanes it holds nothing of are
    free at once, its own lane keeps its order and waits for it."""
    queue = LaneQueue({0: 1})
    for n, key in enumerate(["a", "a", "b", "c"]):
        push(queue, 0, key, n)
    batch = queue.take(10)
    assert batch is not None and [i.n for i in started(batch, 1)] == [0]  # stuck in it
    assert queue.steal(batch) == 3
    others = queue.take(10)
    assert others is not None and [i.n for i in others.records] == [2, 3]
    assert queue.take(10) is None  # "a" still waits for record 0
    assert queue.finish(batch, 1.0) == 1
    again = queue.take(10)
    assert again is not None and [i.n for i in again.records] == [1]
    assert (queue.queued, queue.taken) == (0, 3)


def test_a_stuck_workers_unordered_batch_goes_back_to_the_other_workers() -> None:
    """In unordered mode steal() makes the records a stuck worker has not started ready for
    the others at once, those of the lane it is stuck in too (no order holds them back)."""
    queue = LaneQueue({0: 1}, ordering="unordered")
    for n in range(4):
        push(queue, 0, None, n, source="p")
    batch = queue.take(10)
    assert batch is not None and [i.n for i in started(batch, 1)] == [0]  # stuck in it
    assert queue.steal(batch) == 3
    others = queue.take(10)
    assert others is not None and [i.n for i in started(others)] == [1, 2, 3]
    assert queue.finish(batch, 1.0) == 1 and queue.finish(others, 0.1) == 3
    assert (queue.queued, queue.taken) == (0, 0)


def test_unordered_records_of_one_partition_go_to_several_workers() -> None:
    """In unordered mode a partition's records are not held back by a worker holding some."""
    queue = LaneQueue({0: 1}, ordering="unordered")
    for n in range(4):
        push(queue, 0, "same key", n, source="p")
    first, second = queue.take(2), queue.take(2)
    assert first is not None and second is not None
    assert [i.n for i in first.records] == [0, 1]
    assert [i.n for i in second.records] == [2, 3]


def test_keys_are_lanes_per_source_and_partition_mode_ignores_them() -> None:
    """"key": the same key in two sources is two lanes, a keyless record has its source's lane;
    "partition": one lane per source whatever the keys."""
    queue = LaneQueue({0: 1})
    push(queue, 0, b"k", 0, source="a")
    push(queue, 0, b"k", 0, source="b")
    push(queue, 0, None, 1, source="a")
    assert sum(len(b.runs) for b in iter(lambda: queue.take(1), None)) == 3
    by_partition = LaneQueue({0: 1}, ordering="partition")
    for n, key in enumerate([b"x", b"y", None]):
        push(by_partition, 0, key, n, source="a")
    batch = by_partition.take(10)
    assert batch is not None and len(batch.runs) == 1 and batch.count == 3


@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=200), st.randoms())
def test_random_schedules_keep_every_lane_in_order(
    pushes: list[tuple[int, bool]], rnd: random.Random
) -> None:
    """Under random push/take/finish interleavings with batches handed back early, each lane
    runs in push order, one worker at a time, and nothing is lost."""
    queue = LaneQueue({1: 3, 0: 1})
    seen: dict[object, list[int]] = {}
    running: list[Batch] = []

    def start() -> bool:
        batch = queue.take(rnd.randint(1, 4))
        if batch is None:
            return False
        held = {lane.key for b in running for lane, _, _ in b.runs[: len(b.runs) - b.released]}
        assert not held & {lane.key for lane, _, _ in batch.runs}
        running.append(batch)
        return True

    def end() -> None:
        batch = running.pop(rnd.randrange(len(running)))
        for record in started(batch, rnd.randint(min(1, len(batch.records)), len(batch.records))):
            seen.setdefault(record.key, []).append(record.n)
        if batch.records and rnd.random() < 0.3:
            queue.steal(batch)  # as if stuck in its last record: the rest goes back now
            running.append(batch)
            return
        queue.finish(batch, rnd.random())

    for n, (lane, high) in enumerate(pushes):
        push(queue, int(high), lane * 2 + int(high), n)
        if rnd.random() < 0.5:
            start()
        if running and rnd.random() < 0.5:
            end()
    while running or queue.queued:
        while start():
            pass
        end()
    assert sum(len(v) for v in seen.values()) == len(pushes)
    assert all(order == sorted(order) for order in seen.values())


def test_discard_drops_queued_records_only() -> None:
    """discard removes the sources' queued records; a held lane gives nothing back, and other
    sources keep theirs."""
    queue = LaneQueue({0: 1})
    for n in range(4):
        push(queue, 0, "k", n, source="a" if n % 2 else "b")
    held = take_one(queue)
    assert held is not None and [i.n for i in held.records] == [0]
    assert queue.discard({"b"}) == 1
    assert queue.queued == 2
    assert queue.finish(held, 0.0) == 0  # not run, and not given back
    items = []
    while (batch := take_one(queue)) is not None:
        items.append(item(batch).n)
        queue.finish(batch, 0.0)
    assert items == [1, 3]


def test_zero_weight_level_runs_only_when_others_are_idle() -> None:
    """A level of weight 0 yields to every weighted level."""
    queue = LaneQueue({1: 1, 0: 0})
    push(queue, 0, "z", 0)
    push(queue, 1, "o", 1)
    first = take_one(queue)
    assert first is not None and item(first).n == 1
    second = take_one(queue)
    assert second is not None and item(second).n == 0


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
        push(LaneQueue({0: 1, 1: 1}), 5, "lane", 0)


def test_shares_are_normalised_highest_first() -> None:
    """shares() gives each level's fraction of handler time, highest level first."""
    assert list(LevelShares({0: 7, 1: 14, 2: 29}).shares().items()) == [
        (2, 29 / 50), (1, 14 / 50), (0, 7 / 50)
    ]


def test_estimates_per_level_and_the_fastest() -> None:
    """A level's estimate is the running mean of its measured time per record; ``fastest()``
    the smallest of them (1 s before any was measured), what bounds the polling thread's wait
    for queued work."""
    shares = LevelShares({0: 1, 1: 1})
    assert shares.fastest() == 1.0
    for level, seconds in ((0, 0.01), (1, 0.004)):
        ticket = shares.pick([level])
        assert ticket is not None
        shares.charge(ticket, 2)
        shares.finish(ticket, seconds, records=2)
    assert shares.estimate(0) == pytest.approx(0.005)
    assert shares.fastest() == pytest.approx(0.002)
