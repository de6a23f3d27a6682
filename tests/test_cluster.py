"""LocalKafkaCluster: three real KRaft nodes, replication, leader failover, restarts, the CLI."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from benchmarks._running import wait_for
from priority_kafka import ConfigError, create_priority_topics
from priority_kafka.cli import main
from priority_kafka.errors import BrokerStartError
from priority_kafka.pytest_plugin import CLUSTER_TEST_USERS
from priority_kafka.testing import LocalKafkaCluster
from tests.conftest import over_families
from tests.test_testing import sigterm_stops_every_jvm, wait_gone

pytestmark = pytest.mark.integration


def read_all(servers: str, topic: str, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest",
                             reconnect_backoff_max_ms=1000)
    consumer.assign([TopicPartition(topic, 0)])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(values) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
    finally:
        consumer.close()
    return values


def min_insync_of(servers: str, topic: str) -> str:
    """The topic's own ``min.insync.replicas`` (KeyError when it only has the broker's)."""
    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        admin.close()
    return str(described["topic"][topic]["min.insync.replicas"]["value"])


def test_sigkill_of_a_leader_moves_leadership_and_loses_nothing_acknowledged(
    kafka_cluster, unique_name
):
    """Topics with 3 replicas and min ISR 2: after SIGKILL of a partition's leader another node
    leads it, writes with acks=all go on, and every acknowledged record is still there."""
    topic = unique_name("orders")
    names = create_priority_topics(kafka_cluster.bootstrap_servers, topic, 3,
                                   replication_factor=3, min_insync_replicas=2)
    assert min_insync_of(kafka_cluster.bootstrap_servers, names[0]) == "2"
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers, acks="all",
                             retries=10, reconnect_backoff_max_ms=1000)
    try:
        for i in range(50):
            producer.send(names[0], str(i).encode()).get(30)
        leader = kafka_cluster.leader_of(names[0], 0)
        assert leader in kafka_cluster.broker_ids
        pid = kafka_cluster.broker(leader).pid
        kafka_cluster.stop_broker(leader, signal.SIGKILL)
        assert wait_gone(pid)
        assert leader not in kafka_cluster.running_brokers
        wait_for(lambda: kafka_cluster.leader_of(names[0], 0) not in (None, leader), 60,
                 "another node to lead the partition")
        for i in range(50, 100):
            producer.send(names[0], str(i).encode()).get(60)
    finally:
        producer.close()
    values = read_all(kafka_cluster.bootstrap_servers, names[0], 100)
    assert values == [str(i).encode() for i in range(100)]


def test_rolling_restart_keeps_every_record_and_every_node(kafka_cluster, unique_name):
    """A rolling restart (controlled shutdowns, one node at a time) gives back all nodes,
    each on its own ports, every partition in sync, and every record written before."""
    topic = unique_name("rolling")
    create_priority_topics(kafka_cluster.bootstrap_servers, topic, 1, replication_factor=3,
                           min_insync_replicas=2)
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers, acks="all")
    try:
        for i in range(20):
            producer.send(f"{topic}-0", str(i).encode()).get(30)
    finally:
        producer.close()
    ports = {i: kafka_cluster.broker(i).port for i in kafka_cluster.broker_ids}
    pids = {i: kafka_cluster.broker(i).pid for i in kafka_cluster.broker_ids}
    kafka_cluster.rolling_restart()
    assert kafka_cluster.running_brokers == kafka_cluster.broker_ids
    assert {i: kafka_cluster.broker(i).port for i in kafka_cluster.broker_ids} == ports
    assert all(kafka_cluster.broker(i).pid != pids[i] for i in kafka_cluster.broker_ids)
    assert read_all(kafka_cluster.bootstrap_servers, f"{topic}-0", 20) == [
        str(i).encode() for i in range(20)]


def test_topics_create_cli_sets_replication_and_min_insync(kafka_cluster, unique_name, capsys):
    """`topics create --replication-factor 3 --min-insync-replicas 2` creates every level with
    3 replicas and min.insync.replicas=2; more min ISR than replicas is refused by name."""
    topic = unique_name("cli")
    servers = kafka_cluster.bootstrap_servers
    assert main(["topics", "create", topic, "-n", "2", "--replication-factor", "3",
                 "--min-insync-replicas", "2", "-b", servers]) == 0
    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        described = admin.describe_topics([f"{topic}-0", f"{topic}-1"])
    finally:
        admin.close()
    assert all(len(p["replica_nodes"]) == 3 for t in described for p in t["partitions"])
    assert min_insync_of(servers, f"{topic}-1") == "2"
    with pytest.raises(ConfigError, match=r"'min_insync_replicas' must be .* at most 3"):
        create_priority_topics(servers, topic, 2, replication_factor=3, min_insync_replicas=4)


def test_cluster_rejects_bad_arguments(kafka_cluster):
    """Bad arguments are refused with a message naming the value."""
    with pytest.raises(ValueError, match=r"'brokers' must be an int from 1 to 9 \(got 0\)"):
        LocalKafkaCluster(0)
    with pytest.raises(ValueError, match=r"'ready_timeout' must be positive"):
        LocalKafkaCluster(ready_timeout=-1)
    with pytest.raises(ValueError, match=r"'broker_id' must be one of \[1, 2, 3\] \(got 7\)"):
        kafka_cluster.stop_broker(7)
    with pytest.raises(ValueError, match=r"'sig' must be signal.SIGTERM or signal.SIGKILL"):
        kafka_cluster.stop_broker(1, signal.SIGHUP)
    with pytest.raises(ValueError, match=r"'partition' must be an int >= 0 \(got -1\)"):
        kafka_cluster.leader_of("t", -1)
    with pytest.raises(ValueError, match=r"has no partition 5"):
        kafka_cluster.leader_of("__consumer_offsets", 5000)
    with pytest.raises(ValueError, match=r"'isolatable' must be True or False \(got 'yes'\)"):
        LocalKafkaCluster(isolatable="yes")
    with pytest.raises(ValueError, match=r"'how' must be one of \['drop', 'reject'\]"):
        kafka_cluster.isolate_broker(1, "sever")
    with pytest.raises(ValueError, match=r"'topic' must be a non-empty str"):
        kafka_cluster.leaders("")
    with pytest.raises(BrokerStartError, match=r"start it with isolatable=True"):
        LocalKafkaCluster(3).isolate_broker(1)
    assert kafka_cluster.isolated_brokers == {}


def test_cli_runs_a_cluster_until_sigterm():
    """`python -m priority_kafka broker --brokers 2` prints every node's address, serves, and
    stops all its JVMs on SIGTERM."""
    process = subprocess.Popen(
        [sys.executable, "-m", "priority_kafka", "broker", "--brokers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        address = process.stdout.readline().strip()
        assert len(address.split(",")) == 2, process.stderr.read()
        admin = KafkaAdminClient(bootstrap_servers=address)
        try:
            assert len(admin.describe_cluster()["brokers"]) == 2
        finally:
            admin.close()
        assert sigterm_stops_every_jvm(process) == 2
    finally:
        if process.poll() is None:
            process.kill()


@over_families("tls_files")
def test_both_families_reach_every_node_over_mutual_tls_and_sasl_ssl(
    kafka_cluster, family, unique_name
):
    """All nodes present certificates of one CA: each family writes and reads replicated
    priority topics over mutual TLS and SASL_SSL (SCRAM-SHA-512) through every node's listener."""
    from tests.test_tls import produce_and_consume, settings

    assert len(kafka_cluster.listener("SASL_SSL").split(",")) == 3
    for mode in ("MTLS", "SASL_SSL/SCRAM-SHA-512"):
        topic = unique_name("cluster-tls")
        create_priority_topics(kafka_cluster.bootstrap_servers, topic, 3, replication_factor=3,
                               min_insync_replicas=2)
        config = settings(family, kafka_cluster, mode, password=CLUSTER_TEST_USERS["alice"])
        assert sorted(produce_and_consume(family, config, topic)) == [b"0", b"1", b"2"], mode
    with pytest.raises(ValueError, match=r"'name' must be one of .* \(got 'TLS'\)"):
        kafka_cluster.listener("TLS")
