"""Smoke runs of the executor benchmarks on the session's broker (their numbers mean nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from benchmark_smoke import check_interleaving, finite_positive, run_smoke

pytestmark = pytest.mark.integration


def _run(name: str, tmp_path: Path, bootstrap_servers: str) -> dict[str, Any]:
    result, written = run_smoke(name, tmp_path, bootstrap_servers)
    for plot in result.get("plots", [result.get("plot")]):
        assert (tmp_path / plot).stat().st_size > 0
    return written


@pytest.mark.timeout(120)
def test_executor_seed_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The seed benchmark reports each shard count's rate against the ideal and, round by round,
    against the plain loop, every run in a process of its own."""
    result = _run("executor_seed", tmp_path, bootstrap_servers)
    assert finite_positive(result["plain_loop_per_s"])
    assert set(result["runs"]) == {"1", "8"}
    check_interleaving(result["interleaving"], {"plain_loop", "1", "8"})
    for run in result["runs"].values():
        assert finite_positive(
            run["records_per_s"], run["ratio_to_ideal"], run["speedup_vs_plain_loop"]
        )
        assert run["speedup_per_round"] == [run["speedup_vs_plain_loop"]]


@pytest.mark.timeout(120)
def test_executor_confluent_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The Confluent scenario times every ordering case and its ideal, each run in a process of
    its own, and the serial sleeps it compares partition order with."""
    result = _run("executor_confluent", tmp_path, bootstrap_servers)
    cases = {"key-2", "key-50", "partition", "unordered"}
    assert set(result["cases"]) == cases
    check_interleaving(result["interleaving"], cases | {"serial_sleeps"})
    partition = result["cases"]["partition"]
    assert finite_positive(result["serial_sleeps_s"], partition["over_serial_sleeps"]["ratio"])
    for case in result["cases"].values():
        assert finite_positive(case["wall_s"], case["processing_s"], case["ideal_s"])
        assert case["wall_s"] >= case["processing_s"]


@pytest.mark.timeout(120)
def test_executor_priority_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The priority benchmark gives both latency summaries, a per-round p99 ratio, and per-level
    shares summing to 1, with the load average before every run."""
    result = _run("executor_priority", tmp_path, bootstrap_servers)
    check_interleaving(result["interleaving"]["latency"], {"priority", "fifo"})
    check_interleaving(result["interleaving"]["shares"], {"priority", "no_levels"})
    assert finite_positive(*result["per_round"]["p99_ms"]["ratio_per_round"])
    for side in ("priority", "fifo"):
        assert result["latency"][side]["count"] > 0
        assert finite_positive(result["latency"][side]["p99_ms"])
    for shares in (result["reserved_shares"], *result["shares"].values()):
        assert set(shares) == {"2", "1", "0"}
        assert sum(shares.values()) == pytest.approx(1.0)


@pytest.mark.timeout(120)
def test_executor_cpu_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The CPU benchmark rates threads and the process pool against the plain loop, round by
    round, every run in a process of its own."""
    result = _run("executor_cpu", tmp_path, bootstrap_servers)
    setups = {"threads-1", "threads-4", "threads-16", f"process-pool-{result['cpus']}"}
    assert set(result["runs"]) == setups
    check_interleaving(result["interleaving"], setups | {"plain_loop"})
    for run in result["runs"].values():
        assert finite_positive(run["records_per_s"], run["speedup_vs_plain_loop"])
        assert run["speedup_per_round"] == [run["speedup_vs_plain_loop"]]


@pytest.mark.timeout(120)
def test_rebalance_timeline_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The rebalance timeline gives member 1's records per 250 ms bucket and its longest stop
    for eager and cooperative, each run in a process of its own, and their ratio."""
    result = _run("rebalance_timeline", tmp_path, bootstrap_servers)
    sides = {"eager", "cooperative"}
    check_interleaving(result["interleaving"], sides)
    assert set(result["timelines"]) == sides
    for side in sides:
        (timeline,) = result["timelines"][side]
        assert len(timeline) == result["end_at_s"] / result["bucket_s"]
        assert sum(timeline) > 0
        assert 0 <= result["longest_gap_s"][side] <= result["end_at_s"]
    assert finite_positive(result["gap_ratio"])


@pytest.mark.timeout(120)
def test_partition_pickup_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The pickup benchmark gives, per level, min/median/max of the time until a partition
    added under traffic is handled, each within metadata_max_age_ms + 5 s."""
    result, _ = run_smoke("partition_pickup", tmp_path, bootstrap_servers)
    assert set(result["pickup_per_level"]) == {0, 1, 2}
    for figures in result["pickup_per_level"].values():
        assert 0 < figures["min_s"] <= figures["median_s"] <= figures["max_s"] <= result["bound_s"]
