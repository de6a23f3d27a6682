"""Smoke runs of the consumer benchmarks on the session's broker (their numbers mean nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benchmark_smoke import check_interleaving, finite_positive, run_smoke

from benchmarks._clients import CLIENTS
from priority_kafka.families import CONFLUENT, KAFKA_PYTHON

pytestmark = pytest.mark.integration


def _run(name: str, tmp_path: Path, bootstrap_servers: str) -> dict[str, Any]:
    return run_smoke(name, tmp_path, bootstrap_servers)[1]


def _check_rates(
    comparison: dict[str, Any], names: frozenset[str] = frozenset({"priority", "raw"})
) -> None:
    assert set(comparison["rates"]) == names
    assert finite_positive(comparison["ratio"], *comparison["median_rates"].values())
    assert comparison["ratio_per_round"] == [comparison["ratio"]]  # one smoke round
    assert comparison["ratio_min"] == comparison["ratio"] == comparison["ratio_max"]


def _on_clients(*sides: str) -> set[str]:
    return {f"{client}/{side}" for client in CLIENTS for side in sides}


@pytest.mark.timeout(240)
def test_consumer_overhead_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The overhead benchmark runs on both client families by default: per client, both
    consumers' rates and finite wall, steady and CPU ratios, every read in a process of its own
    with the load average before it."""
    doc = _run("consumer_overhead", tmp_path, bootstrap_servers)
    assert doc["clients"] == list(CLIENTS)
    for client in CLIENTS:
        entry = doc[client]
        for comparison in (
            entry, entry["steady"], entry["per_cpu_second"], entry["steady_per_cpu_second"]
        ):
            _check_rates(comparison, frozenset({f"{client}/priority", f"{client}/raw"}))
    check_interleaving(doc["interleaving"], _on_clients("priority", "raw"))
    assert doc["records"] > 0 and doc["max_poll_records"] == 500


@pytest.mark.timeout(120)
def test_consumer_overhead_runs_on_one_client_when_asked(
    tmp_path: Path, bootstrap_servers: str
) -> None:
    """``--client confluent`` reads with the confluent contenders only (what
    ``confluent_consumer`` measured before issue 21)."""
    from benchmarks import consumer_overhead

    doc = consumer_overhead.main([
        "--smoke", "--out", str(tmp_path), "--bootstrap-servers", bootstrap_servers,
        "--client", "confluent",
    ])
    assert doc["clients"] == [CONFLUENT.name] and KAFKA_PYTHON.name not in doc
    check_interleaving(doc["interleaving"], {"confluent/priority", "confluent/raw"})
    _check_rates(doc["confluent"], frozenset({"confluent/priority", "confluent/raw"}))


@pytest.mark.timeout(180)
def test_priority_latency_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The latency benchmark reports, on both client families, p50/p99 of both sides, finite
    per-round ratios, the per-round batch targets, the load averages, and a CDF plot each."""
    doc = _run("priority_latency", tmp_path, bootstrap_servers)
    check_interleaving(doc["interleaving"], _on_clients("priority", "fifo"))
    assert doc["batch_handling_ms"] == doc["max_poll_records"] * doc["handler_us_per_record"] / 1000
    for client in CLIENTS:
        result = doc[client]
        assert result["per_round"]["p99_ms"]["ratio_per_round"] == [result["p99_ratio"]]
        for side in ("priority", "fifo"):
            summary = result["latency"][side]
            assert summary["count"] >= 1
            assert finite_positive(summary["p50_ms"], summary["p99_ms"])
        assert finite_positive(result["p50_ratio"], result["p99_ratio"])
        targets = result["targets"]
        assert targets["p99_ms_per_round"] == [result["latency"]["priority"]["p99_ms"]]
        assert len(targets["met_per_round"]) == 1
        assert (tmp_path / result["plot"]).stat().st_size > 0


@pytest.mark.timeout(120)
def test_burst_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The burst benchmark reads every record produced, logs each poll, plots, and has a ratio."""
    doc = _run("burst", tmp_path, bootstrap_servers)
    _check_rates(doc["single_level"])
    check_interleaving(doc["single_level"]["interleaving"], {"priority", "raw"})
    assert finite_positive(doc["ratio"])
    timeline = doc["timeline"]
    assert timeline["received"] == timeline["sent"] > 0
    assert timeline["phases"][0]["producing"] == [0]
    polls = json.loads((tmp_path / timeline["polls_file"]).read_text())
    assert polls and set(polls[0]["counts"]) == {"0", "1", "2"}
    assert (tmp_path / doc["plot"]).stat().st_size > 0


@pytest.mark.timeout(120)
def test_aio_wakeup_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The aio wake-up benchmark times level-0 records sent while the consumer waits, in a
    process of its own: per round a finite median and p90, and the load average."""
    doc = _run("aio_wakeup", tmp_path, bootstrap_servers)
    check_interleaving(doc["interleaving"], {"priority"})
    assert finite_positive(*doc["median_ms"], *doc["p90_ms"])


@pytest.mark.timeout(240)
def test_idle_wakeup_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The idle benchmark reports, on both client families, idle CPU and wake-up latencies of
    every side, finite per-round ratios, a plot per client and the load averages."""
    doc = _run("idle_wakeup", tmp_path, bootstrap_servers)
    assert doc["clients"] == list(CLIENTS)
    check_interleaving(doc["interleaving"], _on_clients("priority", "raw"))
    plots = set()
    for client in CLIENTS:
        entry = doc[client]
        assert entry["idle_cpu_per_round"]["ratio_per_round"] == [entry["idle_cpu_ratio"]]
        for side in ("priority", "raw"):
            assert finite_positive(entry["idle"][side]["cpu_percent"])
        for name in ("raw", "priority_highest", "priority_lowest"):
            assert entry["wakeup"][name]["count"] >= doc["samples"]
            assert finite_positive(entry["wakeup"][name]["p99_ms"])
        assert finite_positive(entry["idle_cpu_ratio"], *entry["wakeup_p99_ratio"].values())
        assert (tmp_path / entry["plot"]).stat().st_size > 0
        plots.add(entry["plot"])
    assert len(plots) == len(CLIENTS)
