"""What ``idle_wakeup`` summarises: interleaved idle-CPU and wake-up runs, per client family.

Each side's run is a fresh process returning its idle CPU (``cpu_percent``, ``cpu_seconds``,
``wall_seconds``, ``polls``), its wake-up ``latencies`` per measured name and their ``p99_ms``;
the sides ``priority`` (names ``priority_highest``, ``priority_lowest``) and ``raw`` (name
``raw``) of every client take turns (:func:`benchmarks._clients.interleave_clients`: contenders
``<client>/priority`` and ``<client>/raw``).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from benchmarks._common import Interleaved, ratio_summary
from benchmarks._consumers import latency_summary, plot_cdfs

SIDES = ("priority", "raw")
#: Wake-up measurement -> the side that makes it.
MEASURED = {"priority_highest": "priority", "priority_lowest": "priority", "raw": "raw"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the idle benchmark (``--client`` aside)."""
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--samples", type=int, default=200, help="wake-ups per measured topic")
    parser.add_argument("--rounds", type=int, default=3, help="runs per side")


def idle_summary(
    runs: Interleaved, client: str, plot: Path, labels: dict[str, str], title: str
) -> dict[str, Any]:
    """``client``'s idle CPU per side (median and per round) with the per-round priority/raw
    ratios; the wake-up latencies pooled over the rounds, their per-round p99 ratios, and the
    ``plot`` PNG (their CDFs, ``labels`` naming each measurement)."""
    idle = {
        side: {
            "cpu_percent": statistics.median(runs.values(f"{client}/{side}", "cpu_percent")),
            **{f"{key}_per_round": runs.values(f"{client}/{side}", key)
               for key in ("cpu_percent", "cpu_seconds", "wall_seconds", "polls")},
        }
        for side in SIDES
    }
    priority, raw = f"{client}/priority", f"{client}/raw"
    idle_ratios = runs.compare("cpu_percent", priority, raw)
    latencies = {
        name: runs.pooled(f"{client}/{side}", "latencies_" + name)
        for name, side in MEASURED.items()
    }
    plot_cdfs(plot, {label: latencies[name] for name, label in labels.items()}, title)
    raw_p99 = [r["p99_ms"]["raw"] for r in runs.results[raw]]
    p99_per_round = {
        f"{level}_vs_raw": ratio_summary(
            [r["p99_ms"][f"priority_{level}"] for r in runs.results[priority]], raw_p99
        )
        for level in ("highest", "lowest")
    }
    return {
        "idle": idle,
        "idle_cpu_ratio": idle_ratios["ratio"],
        "idle_cpu_per_round": idle_ratios,
        "target_idle_cpu_percent": 2.0,
        "wakeup": {name: latency_summary(values) for name, values in latencies.items()},
        "wakeup_p99_ratio": {name: ratios["ratio"] for name, ratios in p99_per_round.items()},
        "wakeup_p99_per_round": {
            name: {"raw_p99_ms": raw_p99, **ratios} for name, ratios in p99_per_round.items()
        },
        "target_highest_p99_ms": 50.0,
        "plot": plot.name,
    }


def side_result(idle: dict[str, float], latencies: dict[str, list[float]]) -> dict[str, Any]:
    """One side's run as :func:`idle_summary` reads it."""
    return {
        **idle,
        **{"latencies_" + name: values for name, values in latencies.items()},
        "p99_ms": {name: latency_summary(values)["p99_ms"] for name, values in latencies.items()},
    }
