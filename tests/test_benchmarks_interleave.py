"""The benchmarks' interleaving: fresh processes, turns, per-round ratios and load averages."""

from __future__ import annotations

import os
from typing import Any

import pytest

from benchmarks._common import Contender, interleave, ratio_summary, run_fresh


def report_pid(value: float) -> dict[str, float]:
    """A contender: its value and the id of the process it ran in."""
    return {"value": value, "pid": os.getpid()}


def fail(message: str) -> dict[str, float]:
    """A contender that raises."""
    raise ValueError(message)


def test_each_run_is_a_fresh_process_and_rounds_alternate_who_goes_first() -> None:
    """Two contenders over three rounds run six times in six new processes, A B, B A, A B."""
    runs = interleave(
        [Contender("a", report_pid, {"value": 3.0}), Contender("b", report_pid, {"value": 2.0})],
        rounds=3,
    )
    assert runs.order == [["a", "b"], ["b", "a"], ["a", "b"]]
    pids = runs.values("a", "pid") + runs.values("b", "pid")
    assert len(set(pids)) == 6 and os.getpid() not in pids
    assert all(len(load) == 3 for loads in runs.load_averages.values() for load in loads)
    compared = runs.compare("value", "a", "b")
    assert compared["per_round"] == {"a": [3.0] * 3, "b": [2.0] * 3}
    assert compared["ratio"] == compared["ratio_min"] == compared["ratio_max"] == 1.5
    assert runs.summary()["rounds"] == 3


def test_ratio_summary_gives_the_median_and_extremes_of_the_per_round_ratios() -> None:
    """Ratios are taken round by round, and the median is of those ratios."""
    summary = ratio_summary([2.0, 9.0, 3.0], [1.0, 3.0, 3.0])
    assert summary == {
        "ratio": 2.0, "ratio_per_round": [2.0, 3.0, 1.0], "ratio_min": 1.0, "ratio_max": 3.0,
    }


def test_an_error_in_a_contender_is_raised_in_the_parent_with_its_traceback() -> None:
    """A contender's exception fails the benchmark, naming the contender and the cause."""
    with pytest.raises(RuntimeError, match=r"(?s)contender 'broken' failed.*ValueError: no luck"):
        run_fresh(Contender("broken", fail, {"message": "no luck"}), timeout_s=60)


def test_contenders_need_distinct_names() -> None:
    """Two contenders of the same name could not be told apart in the results."""
    with pytest.raises(ValueError, match="distinct names"):
        interleave([Contender("a", report_pid), Contender("a", report_pid)], rounds=1)


def test_a_monitor_watches_each_run_from_outside_and_its_figures_join_the_result() -> None:
    """``monitor`` gets the pid of each run's process once it started; what it returns after
    the process ended joins that run's result."""
    watched: list[int] = []

    def monitor(pid: int) -> Any:
        watched.append(pid)
        return lambda: {"watched": pid}

    runs = interleave([Contender("a", report_pid, {"value": 1.0})], rounds=2, monitor=monitor)
    pids = runs.values("a", "pid")
    assert runs.values("a", "watched") == pids == watched
    assert os.getpid() not in pids
