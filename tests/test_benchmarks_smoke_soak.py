"""Smoke run of the chaos soak (benchmarks/soak.py) on the session's 3-node cluster: a minute of
combined faults; the invariants must hold even at this size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import soak
from priority_kafka.testing import LocalKafkaCluster

pytestmark = pytest.mark.integration


@pytest.mark.timeout(420)
def test_soak_smoke_holds_its_invariants_under_combined_faults(
    tmp_path: Path, kafka_cluster: LocalKafkaCluster
) -> None:
    """With --smoke (every lane's members, 40 s of faults at 2-5 s intervals), nothing
    acknowledged is lost, no key is handled out of order, the exactly-once outputs are complete
    and single, duplicates stay within the crash bound per fault, and every kind of fault the
    soak has (broker faults one at a time) was applied and recovered from; every process was
    sampled, the long-lived members over the whole run (a leak is judged over 10 minutes at
    least: tests/test_soak_checks.py), and the chart was drawn."""
    result = soak.main(["--smoke", "--seed", "7", "--sample-s", "2", "--out", str(tmp_path)],
                       cluster=kafka_cluster)
    written = json.loads((tmp_path / "soak.json").read_text())
    assert written["benchmark"] == "soak" and written["smoke"] is True
    assert written["lanes"] == json.loads(json.dumps(result["lanes"]))
    assert result["seed"] == 7
    assert result["errors"] == [] and result["drained"]
    for name, lane in result["lanes"].items():
        assert lane["records"] > 0 and lane["send_failures"] == 0, name
        assert (lane["lost"], lane["order_breaks"], lane["over_bound"]) == (0, 0, []), name
        if lane["mode"] == "exactly-once":
            eos = lane["exactly_once"]
            assert (eos["missing"], eos["duplicated"], eos["order_breaks"]) == (0, 0, 0), name
    kinds = {fault["kind"] for fault in result["faults"]}
    assert {"member-kill", "slow-handler", "partitions-added"} <= kinds
    assert kinds & soak.BROKER_FAULTS
    for fault in result["faults"]:
        assert fault.get("ended") is not None, fault
        if fault["kind"] in soak.BROKER_FAULTS | {"member-kill"}:
            assert all(r is not None for r in fault["recovery_s"].values()), fault
    members = [label for label in result["resources"] if label.endswith("/member-0")]
    assert len(members) == len(result["lanes"])
    for label in [*members, "soak (this process)"]:
        row = result["resources"][label]
        assert row["long_lived"] and row["rss_mb"]["start"] > 0 and row["fds"]["end"] > 0, label
    assert (tmp_path / result["plot"]).stat().st_size > 0
    assert result["ok"]
