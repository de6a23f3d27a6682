"""The lifecycle both executors run (_workers/_lifecycle.py) and the pool's Completion protocol,
without a broker: the order of a run's steps, once per executor, the drain's warning, the
release after a failing step, and completions of a group that is not the ledger's."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

import pytest

from priority_kafka import ExecutorConfig, HandlerError
from priority_kafka._structs import TopicPartition
from priority_kafka._workers import (
    Completion,
    Counters,
    Lifecycle,
    RecordHandler,
    State,
    WorkerPool,
)
from priority_kafka.errors import IllegalStateError

TP = TopicPartition("t", 0)
log = logging.getLogger("tests.lifecycle")


class Rec:
    def __init__(self, offset: int) -> None:
        self.offset, self.key, self.value, self.headers = offset, None, b"v", []


class Marks:
    """A Completion that is not the ledger's (as ShareExecutor's): it records what is marked."""

    def __init__(self, epoch: int = 7, forgotten: bool = False) -> None:
        self.epoch, self.forgotten = epoch, forgotten
        self.done: list[int] = []
        self.all_done = threading.Event()

    def complete(self, offsets: Iterable[int]) -> None:
        self.done.extend(offsets)
        if len(self.done) >= 20:
            self.all_done.set()


class DeadLetters:
    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    def close(self) -> None:
        self.steps.append("dead letters closed")


def parts(handle, steps: list[str] | None = None, **options):
    """A lifecycle, a one-worker pool and a handler running ``handle``."""
    config = ExecutorConfig(shards=1, **options)
    counters = Counters()
    lifecycle = Lifecycle(log, config.drain_timeout_ms, "are what the test says")
    handler = RecordHandler(handle, config, on_failure=None, stopping=lifecycle.stopping,
                            count=counters.add)
    if steps is not None:
        handler.dead_letter_producer = DeadLetters(steps)
    return lifecycle, WorkerPool({0: 1}, 1, "unordered", handler, counters), handler, counters


def test_the_pool_marks_any_completion_and_counts_a_forgotten_ones_as_stale():
    """The pool needs of a group only epoch, forgotten and complete(): every record pushed with
    a plain Completion is marked done there; a forgotten one's marks count as stale."""
    lifecycle, pool, _, counters = parts(lambda record: None)
    fresh, forgotten = Marks(), Marks(epoch=3, forgotten=True)
    marks: list[Completion] = [fresh, forgotten]
    pool.start()
    try:
        pool.push((0, TopicPartition("t", n), group, [Rec(i) for i in range(20)])
                  for n, group in enumerate(marks))
        assert fresh.all_done.wait(10) and forgotten.all_done.wait(10)
    finally:
        pool.close()
    assert sorted(fresh.done) == sorted(forgotten.done) == list(range(20))
    assert counters.snapshot().stale_completions == 20
    assert lifecycle.state is State.NEW


def test_a_run_starts_steps_until_stopped_drains_then_releases_once():
    """start, the steps until stop(), the drain, drained(), then close() and the dead letters,
    the handler and the pool; NEW, RUNNING, CLOSED; a second run is refused, naming the state
    (and ``also``)."""
    steps: list[str] = []
    lifecycle, pool, handler, _ = parts(lambda record: None, steps)

    def step() -> None:
        assert lifecycle.state is State.RUNNING and not lifecycle.stopping.is_set()
        steps.append("step")
        if steps.count("step") == 3:
            lifecycle.stop()

    lifecycle.run(False, pool, handler, start=lambda: steps.append("start"), step=step,
                  drained=lambda: steps.append("drained"),
                  close=lambda: steps.append("close"))
    assert steps == ["start", "step", "step", "step", "drained", "close", "dead letters closed"]
    assert lifecycle.state is State.CLOSED and lifecycle.stopping.is_set()
    with pytest.raises(IllegalStateError, match=r"run\(\) may be called once per executor "
                                                r"\(it is closed\)"):
        lifecycle.run(False, pool, handler, start=steps.clear, step=steps.clear,
                      drained=steps.clear, close=steps.clear)
    assert steps  # nothing of the refused run ran
    also = Lifecycle(log, 0, "", also=", or run_async()")
    also.begin()
    with pytest.raises(IllegalStateError, match=r"once per executor, or run_async\(\) "
                                                r"\(it is running\)"):
        also.begin(take=False)


def test_a_failing_step_still_releases_everything_and_raises():
    """An error in the loop skips the drain but not the release: close() runs, the handler and
    the pool are closed, the state is CLOSED, and the error comes out."""
    steps: list[str] = []
    lifecycle, pool, handler, _ = parts(lambda record: None, steps)

    def step() -> None:
        raise RuntimeError("poll failed")

    with pytest.raises(RuntimeError, match="poll failed"):
        lifecycle.run(False, pool, handler, start=lambda: None, step=step,
                      drained=lambda: steps.append("drained"),
                      close=lambda: steps.append("close"))
    assert steps == ["close", "dead letters closed"]
    assert lifecycle.state is State.CLOSED and lifecycle.stopping.is_set()


def test_a_drain_past_its_budget_warns_on_the_executors_logger(caplog):
    """A handler still running after drain_timeout_ms: the executor's logger says what becomes
    of its record; the pool's failure under "stop" is raised as a HandlerError naming it."""
    started, release = threading.Event(), threading.Event()

    def handle(record: Rec) -> None:
        if record.offset == 0:
            started.set()
            release.wait(10)
        else:
            raise ValueError("boom")

    lifecycle, pool, _, _ = parts(handle, drain_timeout_ms=50, max_attempts=1)
    pool.start()
    try:
        pool.push([(0, TP, Marks(), [Rec(0)])])
        assert started.wait(10)
        with caplog.at_level(logging.WARNING, logger=log.name):
            lifecycle.drain(pool)
        assert lifecycle.stopping.is_set()
        assert [(r.name, r.getMessage()) for r in caplog.records] == [
            (log.name, "stop: handlers still running after drain_timeout_ms=50; their records "
                       "are what the test says"),
        ]
    finally:
        release.set()
        pool.close()
    lifecycle.raise_failure(None, "stop")  # nothing failed: nothing raised
    failing = parts(handle, max_attempts=1)[1]
    failing.start()
    try:
        failing.push([(0, TP, Marks(), [Rec(5)])])
        deadline = time.monotonic() + 10
        while not failing.halted:
            assert time.monotonic() < deadline, "the failing record did not halt the pool"
            time.sleep(0.01)
    finally:
        failing.close()
    with pytest.raises(HandlerError, match=r"t\[0\]@5 \('stop' policy\): ValueError"):
        lifecycle.raise_failure(failing.failure, "stop")
