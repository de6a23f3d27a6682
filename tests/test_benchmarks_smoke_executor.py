"""Smoke runs of the executor benchmarks on the session's broker (their numbers mean nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from benchmark_smoke import finite_positive, run_smoke

pytestmark = pytest.mark.integration


def _run(name: str, tmp_path: Path, bootstrap_servers: str) -> dict[str, Any]:
    result, written = run_smoke(name, tmp_path, bootstrap_servers)
    for plot in result.get("plots", [result.get("plot")]):
        assert (tmp_path / plot).stat().st_size > 0
    return written


@pytest.mark.timeout(120)
def test_executor_seed_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The seed benchmark reports each shard count's rate against the ideal and the plain loop."""
    result = _run("executor_seed", tmp_path, bootstrap_servers)
    assert finite_positive(result["plain_loop_per_s"])
    assert set(result["runs"]) == {"1", "8"}
    for run in result["runs"].values():
        assert finite_positive(
            run["records_per_s"], run["ratio_to_ideal"], run["speedup_vs_plain_loop"]
        )


@pytest.mark.timeout(120)
def test_executor_confluent_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The Confluent scenario times every ordering case and its ideal."""
    result = _run("executor_confluent", tmp_path, bootstrap_servers)
    assert set(result["cases"]) == {"key-2", "key-50", "partition", "unordered"}
    for case in result["cases"].values():
        assert finite_positive(case["wall_s"], case["processing_s"], case["ideal_s"])
        assert case["wall_s"] >= case["processing_s"]


@pytest.mark.timeout(120)
def test_executor_priority_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The priority benchmark gives both latency summaries and per-level shares summing to 1."""
    result = _run("executor_priority", tmp_path, bootstrap_servers)
    for side in ("priority", "fifo"):
        assert result["latency"][side]["count"] > 0
        assert finite_positive(result["latency"][side]["p99_ms"])
    for shares in (result["reserved_shares"], *result["shares"].values()):
        assert set(shares) == {"2", "1", "0"}
        assert sum(shares.values()) == pytest.approx(1.0)


@pytest.mark.timeout(120)
def test_executor_cpu_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The CPU benchmark rates threads and the process pool against the plain loop."""
    result = _run("executor_cpu", tmp_path, bootstrap_servers)
    assert set(result["runs"]) == {"threads-1", "threads-4", "threads-16",
                                   f"process-pool-{result['cpus']}"}
    for run in result["runs"].values():
        assert finite_positive(run["records_per_s"], run["speedup_vs_plain_loop"])
