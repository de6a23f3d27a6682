"""Helpers shared by the benchmark smoke tests; pytest puts tests/ on sys.path."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any


def run_smoke(
    name: str, tmp_path: Path, bootstrap_servers: str, *options: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run benchmarks.<name> in smoke mode (with ``options``); return its result and JSON file,
    checked to agree."""
    module = importlib.import_module(f"benchmarks.{name}")
    result = module.main(
        ["--smoke", "--out", str(tmp_path), "--bootstrap-servers", bootstrap_servers, *options]
    )
    written = json.loads((tmp_path / f"{name}.json").read_text())
    assert written["benchmark"] == name
    assert written["smoke"] is True
    for key, value in result.items():
        assert json.loads(json.dumps(written[key])) == json.loads(json.dumps(value))
    return result, written


def finite_positive(*values: float) -> bool:
    return all(math.isfinite(v) and v > 0 for v in values)


def check_interleaving(summary: dict[str, Any], contenders: set[str], rounds: int = 1) -> None:
    """``summary`` (from ``Interleaved.summary()``) covers ``contenders`` over ``rounds`` rounds,
    with the load average (1, 5, 15 minutes) read before every run, and no run failed (a
    failed run is recorded, not raised: a smoke run must not pass over one)."""
    assert summary["failed_runs"] == {}, summary["failed_runs"]
    assert summary["rounds"] == rounds
    assert [set(order) for order in summary["order_per_round"]] == [contenders] * rounds
    loads = summary["load_average_before_run"]
    assert set(loads) == contenders
    assert all(len(per_round) == rounds for per_round in loads.values())
    assert all(len(load) == 3 and min(load) >= 0 for runs in loads.values() for load in runs)
