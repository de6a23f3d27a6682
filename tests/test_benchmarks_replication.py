"""The benchmarks' ``--brokers`` option and ``benchmarks.replication_cost``, cheaply: the
harness finds a cluster's size and creates replicated topics and acks=all producers on it (the
session's 3-node cluster), keeps one replica and acks=1 on one broker, and the comparison
takes the headline figures of each benchmark's document and the per-round ratios."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.admin import KafkaAdminClient

from benchmarks import replication_cost
from benchmarks._common import (
    Interleaved,
    Replication,
    create_level_topics,
    create_topics,
    parse_args,
    preload,
    replication,
)
from tests.test_cluster import min_insync_of


def test_replication_follows_the_node_count() -> None:
    assert (Replication(1).replication_factor, Replication(1).min_insync_replicas,
            Replication(1).acks) == (1, 1, 1)
    assert (Replication(3).replication_factor, Replication(3).min_insync_replicas,
            Replication(3).acks) == (3, 2, "all")
    assert Replication(5).topic_settings() == {"replication_factor": 3, "min_insync_replicas": 2}
    assert Replication(1).topic_settings() == {}  # the defaults, which any version takes
    assert parse_args("x", ["--brokers", "3"]).brokers == 3
    assert parse_args("x", []).brokers == 1
    with pytest.raises(SystemExit):
        parse_args("x", ["--brokers", "0"])


def _replicas(servers: str, topic: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        (described,) = admin.describe_topics([topic])
    finally:
        admin.close()
    return len(described["partitions"][0]["replica_nodes"])


def test_the_harness_replicates_on_the_cluster(
    kafka_cluster: Any, bootstrap_servers: str, unique_name: Any
) -> None:
    """On the 3-node cluster: 3 replicas, min ISR 2, and preloading with acks=all works; on
    the single broker: one replica."""
    servers = kafka_cluster.bootstrap_servers
    assert replication(servers) == Replication(3)
    assert replication(bootstrap_servers) == Replication(1)
    levels = create_level_topics(servers, unique_name("bench-levels"), 3)
    plain = unique_name("bench-plain")
    create_topics(servers, [plain])
    for topic in [*levels, plain]:
        assert _replicas(servers, topic) == 3 and min_insync_of(servers, topic) == "2"
    preload(servers, plain, 20)
    single = unique_name("bench-single")
    create_topics(bootstrap_servers, [single])
    assert _replicas(bootstrap_servers, single) == 1


def test_replication_cost_compares_headlines_round_by_round() -> None:
    """Headline figures from each benchmark's document, ratios cluster / node per round."""
    table = {"medians": {"records_per_s": {"confluent": 100.0},
                         "records_per_cpu_s": {"confluent": 50.0}}}
    assert replication_cost.HEADLINES["client_table"](table) == {
        "confluent records_per_s": 100.0, "confluent records_per_cpu_s": 50.0}
    latency = {"latency": {"kafka-python": {"priority": {"p50_ms": 5.0, "p99_ms": 9.0}}}}
    assert replication_cost.HEADLINES["executor_priority"](latency) == {
        "kafka-python priority p50_ms": 5.0, "kafka-python priority p99_ms": 9.0}
    runs = Interleaved(
        order=[["1 node", "3 nodes"], ["3 nodes", "1 node"]],
        results={"1 node": [{"x": 10.0}, {"x": 20.0}], "3 nodes": [{"x": 5.0}, {"x": 30.0}]},
        load_averages={"1 node": [[0.0] * 3] * 2, "3 nodes": [[0.0] * 3] * 2},
    )
    compared = replication_cost.compare(runs, "1 node", "3 nodes")["x"]
    assert compared["ratio_per_round"] == [0.5, 1.5] and compared["ratio"] == 1.0
    with pytest.raises(SystemExit, match="--benchmarks"):
        replication_cost.main(["--benchmarks", "nope"])
