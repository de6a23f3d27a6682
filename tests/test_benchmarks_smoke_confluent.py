"""Smoke runs of the confluent-kafka benchmarks on the session's broker (numbers mean nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmark_smoke import check_interleaving, finite_positive, run_smoke

from priority_kafka.families import NAMES

pytestmark = pytest.mark.integration


@pytest.mark.timeout(180)
def test_confluent_producer_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The producer benchmark runs both contenders in fresh processes and reports rates,
    per-CPU-second rates, per-round ratios and load averages (the consumer side of confluent is
    ``consumer_overhead --client confluent``, tests/test_benchmarks_smoke_consumer.py)."""
    doc = run_smoke("confluent_producer", tmp_path, bootstrap_servers)[1]
    assert doc["rounds"] == 1 and doc["order_per_round"] == [["raw", "priority"]]
    assert set(doc["load_average_before_run"]) == {"raw", "priority"}
    for key in ("records_per_s", "records_per_cpu_s"):
        comparison = doc[key]
        assert finite_positive(*comparison["medians"].values(), *comparison["ratio_per_round"])
    assert doc["records"] > 0


@pytest.mark.timeout(180)
def test_client_table_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The client table reads the same records with two contenders per family (its raw client
    and its PriorityConsumer; on aiokafka also three raw consumers, one per level), each in a
    fresh process, and gives each priority front-end's ratios to its own raw client (the aio
    one's also to the three raw consumers)."""
    doc = run_smoke("client_table", tmp_path, bootstrap_servers)[1]
    names = {f"{name}{side}" for name in NAMES for side in ("", " priority")}
    names.add("aiokafka per level")
    check_interleaving(doc, names)
    for key in ("records_per_s", "records_per_cpu_s"):
        assert set(doc["medians"][key]) == names
        assert finite_positive(*doc["medians"][key].values())
    assert set(doc["ratios"]) == {f"{name} priority / {name}" for name in NAMES} | {
        "aiokafka priority / aiokafka per level"}
    for ratios in doc["ratios"].values():
        assert finite_positive(*(ratios[key]["ratio"] for key in ("records_per_s",
                                                                  "records_per_cpu_s")))


@pytest.mark.timeout(180)
def test_group_protocol_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The group-protocol benchmark runs classic eager, classic cooperative and the consumer
    protocol, each in a fresh process, and on each the joining member takes half of the
    partitions, member 1's longest stall is measured, duplicates are counted and nothing below
    the final commits was left unhandled."""
    doc = run_smoke("group_protocol", tmp_path, bootstrap_servers)[1]
    sides = {"classic-eager", "classic-cooperative", "consumer"}
    check_interleaving(doc["interleaving"], sides)
    rounds = doc["per_round"]
    assert all(rounds["second_member_partitions"][side] == [6] for side in sides), rounds
    assert finite_positive(*(rounds["longest_gap_s"][side][0] for side in sides))
    assert finite_positive(*(rounds["second_full_s"][side][0] for side in sides))
    assert all(rounds["lost"][side] == [0] for side in sides), rounds["lost"]
    assert all(rounds["duplicates"][side][0] >= 0 for side in sides)


@pytest.mark.timeout(240)
def test_share_priority_smoke(tmp_path: Path, bootstrap_servers: str) -> None:
    """The share-group benchmark runs priority and FIFO, and one and two members, each in a
    fresh process: every record is handled once, none archived, and it reports the urgent
    latency ratio, the member rates and the load averages."""
    doc = run_smoke("share_priority", tmp_path, bootstrap_servers)[1]
    latency = doc["latency"]
    check_interleaving(latency["interleaving"], {"priority", "fifo"})
    for side in ("priority", "fifo"):
        (run,) = latency["per_round"][side]
        assert (run["handled"], run["handled_twice"], run["archived"]) == (2005, 0, 0)
        assert finite_positive(run["urgent_p99_ms"], run["drain_s"])
    assert latency["per_round"]["priority"][0]["delivery_counts"]["2"] == {"1": 5}
    assert finite_positive(*latency["urgent_p99_ms"]["ratio_per_round"])
    scaling = doc["scaling"]
    check_interleaving(scaling["interleaving"], {"members-1", "members-2"})
    assert finite_positive(*scaling["median_records_per_s"].values())
    runs = [run for per_round in scaling["per_round"].values() for run in per_round]
    assert [len(run["per_member_handled"]) for run in runs] == [1, 2]
    assert all(run["archived"] == 0 and min(run["per_member_handled"]) > 0 for run in runs)
