"""Smoke runs of the confluent-kafka benchmarks on the session's broker (numbers mean nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmark_smoke import finite_positive, run_smoke

pytestmark = pytest.mark.integration


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", ["confluent_consumer", "confluent_producer"])
def test_interleaved_benchmark_smoke(name: str, tmp_path: Path, bootstrap_servers: str) -> None:
    """The consumer and producer benchmarks run both contenders in fresh processes and report
    rates, per-CPU-second rates, per-round ratios and load averages."""
    doc = run_smoke(name, tmp_path, bootstrap_servers)[1]
    assert len(doc["rounds"]) == 1 and len(doc["load_average"]) == 1
    for key in ("median_records_per_s", "median_records_per_cpu_s"):
        assert set(doc[key]) == {"raw", "priority"}
        assert finite_positive(*doc[key].values())
    assert finite_positive(doc["median_ratio"], doc["median_ratio_per_cpu_s"], *doc["ratios"])
    assert doc["rounds"][0]["raw"]["records"] == doc["rounds"][0]["priority"]["records"] > 0


@pytest.mark.timeout(180)
def test_confluent_idle_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The idle benchmark reports idle CPU of both consumers and every side's wake-ups."""
    doc = run_smoke("confluent_idle", tmp_path, bootstrap_servers)[1]
    assert finite_positive(doc["idle"]["raw"]["cpu_percent"],
                           doc["idle"]["priority"]["cpu_percent"])
    for name in ("raw", "priority_highest", "priority_lowest"):
        assert doc["wakeup"][name]["count"] == doc["samples"]
        assert finite_positive(doc["wakeup"][name]["p99_ms"])
