"""The benchmarks' interleaving: fresh processes, turns, per-round ratios and load averages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import priority_kafka
from benchmarks import _code
from benchmarks._common import Contender, interleave, ratio_summary, run_fresh
from benchmarks._executor import Meter, run_executor


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


def hang(seconds: float) -> dict[str, float]:
    """A contender that does not return in time."""
    time.sleep(seconds)
    return {}


def test_a_contender_that_hangs_is_stopped_and_says_where_it_hung(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The parent gives up after its timeout and terminates the run, which first writes its
    threads' stacks to stderr: a hang in CI names the line it hung on."""
    with pytest.raises(TimeoutError, match="contender 'stuck' gave no result in 3 s"):
        run_fresh(Contender("stuck", hang, {"seconds": 120}), timeout_s=3)
    err = capfd.readouterr().err
    assert "most recent call first" in err and " in hang" in err, err


def test_an_error_in_a_contender_is_raised_in_the_parent_with_its_traceback() -> None:
    """A contender's exception fails the benchmark, naming the contender and the cause."""
    with pytest.raises(RuntimeError, match=r"(?s)contender 'broken' failed.*ValueError: no luck"):
        run_fresh(Contender("broken", fail, {"message": "no luck"}), timeout_s=60)


def test_a_failed_run_is_recorded_for_its_round_and_the_rounds_go_on() -> None:
    """One contender failing (parallel-consumer's harness not closing in time, once, under
    load) costs that run's figures, not the run: the contender after it still runs, a ratio
    has no round to pair, and the failure is in the summary."""
    runs = interleave(
        [Contender("a", fail, {"message": "did not close"}),
         Contender("b", report_pid, {"value": 2.0})],
        rounds=1,
    )
    assert runs.values("a", "value") == []
    assert runs.values("b", "value") == [2.0]
    [failure] = runs.failures["a"]
    assert failure["round"] == 1 and "ValueError: did not close" in failure["error"]
    assert runs.compare("value", "b", "a") == {
        "per_round": {"b": [], "a": []}, "failed": "no round completed by both"}
    assert runs.summary()["failed_runs"] == {"a": [failure]}


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


def report_code() -> dict[str, Any]:
    """A contender: which priority_kafka it imported (the copy's mark, or this checkout's), and
    which one a process it starts imports (from this checkout's root, as Spark's Python workers
    run: a working directory holding this checkout's priority_kafka)."""
    import priority_kafka

    child = subprocess.run(
        [sys.executable, "-c",
         "import priority_kafka; print(getattr(priority_kafka, 'CODE_MARK', 1.0))"],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True, text=True, check=True,
    )
    return {
        "mark": getattr(priority_kafka, "CODE_MARK", 1.0),
        "child_mark": float(child.stdout),
        "file": priority_kafka.__file__,
    }


@pytest.fixture
def other_code(tmp_path: Path) -> Iterator[Path]:
    """A checkout holding a copy of priority_kafka that says so (``CODE_MARK = 4.0``), used as
    ``--code other=<it>`` for the test; this checkout's alone afterwards."""
    package = Path(priority_kafka.__file__).parent
    shutil.copytree(package, tmp_path / "priority_kafka",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with (tmp_path / "priority_kafka" / "__init__.py").open("a") as init:
        init.write("\nCODE_MARK = 4.0\n")
    _code.use([f"other={tmp_path}"])
    yield tmp_path
    _code.use([])


def test_code_runs_every_contender_on_each_checkout_in_turn(other_code: Path) -> None:
    """With ``--code other=PATH`` each contender runs on this checkout's priority_kafka and on
    PATH's, alternating who goes first; the benchmark sees the current runs, the JSON's code
    section both, with the per-round ratios current / other."""
    runs = interleave([Contender("a", report_code)], rounds=2)
    assert runs.values("a", "mark") == [1.0, 1.0]
    assert all(not f.startswith(str(other_code)) for f in runs.values("a", "file"))
    section = _code.comparison()
    assert section is not None and section["versions"]["other"] == str(other_code.resolve())
    (run,) = section["runs"]
    assert run["interleaving"]["order_per_round"] == [
        ["a@current", "a@other"], ["a@other", "a@current"],
    ]
    mark = run["contenders"]["a"]["mark"]
    assert mark["per_round"] == {"current": [1.0, 1.0], "other": [4.0, 4.0]}
    assert mark["current / other"]["ratio_per_round"] == [0.25, 0.25]
    # A process the contender starts imports the same code, whatever its working directory.
    assert run["contenders"]["a"]["child_mark"]["per_round"] == {
        "current": [1.0, 1.0], "other": [4.0, 4.0],
    }
    assert "file" not in run["contenders"]["a"]  # only numbers are compared
    assert _code.table({"code": section}, ["mark"])[2:] == [
        "| 0 | a | mark (current / other) | 0.250 | 0.250, 0.250 |",
    ]


def test_code_refuses_a_checkout_without_the_package(tmp_path: Path) -> None:
    """A PATH that holds no priority_kafka is refused, naming it, before anything runs."""
    with pytest.raises(SystemExit, match="holds no priority_kafka"):
        _code.use([f"old={tmp_path}"])
    with pytest.raises(SystemExit, match="NAME=PATH"):
        _code.use([str(tmp_path)])
    assert _code.comparison() is None


class _Failing:
    """An executor whose run() fails at once, as one stopped by a TransactionError does."""

    def run(self) -> None:
        raise RuntimeError("the transactional producer cannot go on")

    def stop(self) -> None:
        return None


def test_a_run_whose_executor_failed_reports_its_error_at_once_not_after_the_timeout() -> None:
    """A contender waiting for its records is told at once when the executor ended with an
    error (a CI smoke run sat until the test's timeout, the error never shown)."""
    meter = Meter(expected=10)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="cannot go on"):
        run_executor(_Failing(), meter, timeout_s=60)  # type: ignore[arg-type]
    assert time.monotonic() - started < 5
