"""Smoke test of benchmarks/spark_ingest.py: a tiny run still produces its full report."""

from __future__ import annotations

import importlib
import json

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.spark]


# Four Spark sessions, each in a fresh process (60-90 s apiece on the shared 2-core machine at a
# load average of 15-25): the suite's 300 s timed out there twice with every contender done.
@pytest.mark.timeout(600)
def test_spark_ingest_smoke_reports_every_contender_and_the_levels_plot(
    bootstrap_servers, tmp_path
):
    """--smoke ingests with Spark's Kafka source and ours on both clients, interleaved in fresh
    processes, and writes per-round ratios, load averages, JSON and PNG."""
    spark_ingest = importlib.import_module("benchmarks.spark_ingest")
    result = spark_ingest.main(
        ["--smoke", "--out", str(tmp_path), "--bootstrap-servers", bootstrap_servers]
    )
    written = json.loads((tmp_path / "spark_ingest.json").read_text())
    assert written["ratio"] == result["ratio"] > 0
    contenders = ("spark_kafka", "priority_kafka_kafka_python", "priority_kafka_confluent")
    for contender in contenders:
        (run,) = written["runs"][contender]
        assert run["records_per_s"] > 0 and run["batches"] >= 1
        assert len(written["interleaving"]["load_average_before_run"][contender]) == 1
    for contender in contenders[1:]:
        assert len(written["ratios"][f"{contender}/spark_kafka"]["ratio_per_round"]) == 1
    assert written["connector"].startswith("spark-sql-kafka-0-10_2.13:")
    batches = written["levels_run"]["batches"]
    added = sum(written["levels_run"]["initial"].values()) + sum(
        written["levels_run"]["added"].values()
    )
    assert sum(sum(batch.values()) for batch in batches) == added
    assert all(sum(b.values()) <= written["levels_run"]["max_offsets_per_trigger"] for b in batches)
    assert (tmp_path / "spark_ingest_levels.png").stat().st_size > 0
