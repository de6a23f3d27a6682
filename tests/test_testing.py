"""The local Apache Kafka broker: start, readiness, clear failures, and no process left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from kafka.admin import KafkaAdminClient

from priority_kafka import BrokerStartError
from priority_kafka.kafka_python._kafka import keeping_pending_join
from priority_kafka.testing import LocalKafkaBroker, broker_jars, local_kafka

pytestmark = pytest.mark.integration


def wait_gone(pid, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.1)
    return False


def sigterm_stops_every_jvm(process: subprocess.Popen[str]) -> int:
    """SIGTERM the CLI ``process``: it exits 0 and every JVM it ran is gone; how many ran."""
    java = [c.pid for c in psutil.Process(process.pid).children(recursive=True)]
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
    assert all(wait_gone(pid) for pid in java)
    return len(java)


def test_local_kafka_serves_requests_and_stops(tmp_path):
    """The broker answers metadata requests while running; its JVM is gone after the block."""
    with local_kafka({"num.partitions": 2}) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            assert admin.describe_cluster()["brokers"]
        finally:
            admin.close()
        pid = broker.pid
        assert "Kafka Server started" in broker.log_file.read_text()
    assert wait_gone(pid)


def test_missing_java_is_reported(monkeypatch, tmp_path):
    """Without java on PATH, start() fails naming java."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrokerStartError, match="'java' was not found on PATH"):
        LocalKafkaBroker().start()


def test_unresolvable_jars_are_reported(monkeypatch, tmp_path):
    """When Maven fails, the error says so and shows Maven's output; nothing half-written stays."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    mvn = fake_bin / "mvn"
    mvn.write_text("#!/bin/sh\necho 'Could not resolve dependencies: no network'\nexit 1\n")
    mvn.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    cache = tmp_path / "cache"
    with pytest.raises(BrokerStartError, match=r"(?s)Maven could not resolve.*no network"):
        broker_jars(cache)
    assert not any(cache.rglob("*.jar"))


def test_a_broker_that_does_not_come_up_in_time_is_reported_and_stopped():
    """A readiness timeout fails with the broker's log tail, and the JVM is stopped."""
    def brokers_of_this_process():
        return {child.pid for child in psutil.Process().children()
                if "kafka.Kafka" in child.cmdline()}

    before = brokers_of_this_process()  # the session's broker, when this process started it
    broker = LocalKafkaBroker(ready_timeout=0.01)
    with pytest.raises(BrokerStartError, match=r"did not answer a metadata request within 0\.01s"):
        broker.start()
    assert broker.pid is None
    assert brokers_of_this_process() == before


def test_cli_runs_a_broker_until_sigterm():
    """`python -m priority_kafka broker` prints the address, serves, and stops on SIGTERM."""
    process = subprocess.Popen(
        [sys.executable, "-m", "priority_kafka", "broker"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        address = process.stdout.readline().strip()
        assert address.startswith("127.0.0.1:"), process.stderr.read()
        admin = KafkaAdminClient(bootstrap_servers=address)
        admin.close()
        assert sigterm_stops_every_jvm(process) == 1
    finally:
        if process.poll() is None:
            process.kill()


def test_the_broker_dies_with_the_process_that_started_it():
    """SIGKILL of the Python process that started a broker takes the broker's JVM down too."""
    script = (
        "from priority_kafka.testing import LocalKafkaBroker\n"
        "import sys, time\n"
        "b = LocalKafkaBroker().start()\n"
        "print(b.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        java_pid = int(process.stdout.readline())
        assert psutil.pid_exists(java_pid)
        process.kill()
        process.wait()
        assert wait_gone(java_pid)
    finally:
        if process.poll() is None:
            process.kill()


def test_a_broker_started_from_a_thread_outlives_the_thread():
    """A node started (or restarted) from a thread that then ends keeps running: the JVM's
    death signal follows the thread that forked it (the soak's restarts lost their nodes)."""
    started: list[LocalKafkaBroker] = []
    thread = threading.Thread(target=lambda: started.append(LocalKafkaBroker().start()))
    thread.start()
    thread.join(120)
    assert started, "the broker did not start"
    broker = started[0]
    try:
        time.sleep(1.0)  # PR_SET_PDEATHSIG acts at once when the thread ends: give it time
        assert broker.pid is not None and psutil.pid_exists(broker.pid)
        assert psutil.Process(broker.pid).status() != psutil.STATUS_ZOMBIE
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            assert admin.describe_cluster()["brokers"]
        finally:
            admin.close()
    finally:
        broker.stop()


def test_broker_rejects_bad_arguments():
    """Bad arguments are refused before anything starts."""
    with pytest.raises(ValueError, match="'ready_timeout' must be positive"):
        LocalKafkaBroker(ready_timeout=0)
    with pytest.raises(BrokerStartError, match="not running"):
        _ = LocalKafkaBroker().bootstrap_servers


def test_jars_are_cached_outside_the_repository():
    """The resolved jars live in the cache directory, not in the work tree."""
    lib = broker_jars()
    assert any(lib.glob("kafka_2.13-*.jar"))
    assert Path(__file__).resolve().parents[1] not in lib.resolve().parents


def test_a_port_is_handed_out_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A port drawn twice before its broker binds it would put two listeners (or two nodes) on
    one port: every draw that repeats one handed out before is drawn again."""
    from priority_kafka.testing import _broker

    monkeypatch.setattr(_broker.secrets, "randbelow", lambda n: 1234)  # the same draw each time
    ports = [_broker._free_port() for _ in range(3)]
    assert len(set(ports)) == 3, ports


def test_restart_keeps_port_and_data_under_a_running_client():
    """A broker on a fixed port restarts (SIGTERM, then SIGKILL) on the same port and data: a
    producer and a consumer created before keep working and nothing written is lost."""
    from kafka import KafkaConsumer, KafkaProducer

    from priority_kafka.testing import _free_port

    port = _free_port()
    with LocalKafkaBroker(port=port) as broker:
        address = broker.bootstrap_servers
        assert address == f"127.0.0.1:{port}" and broker.port == port
        producer = KafkaProducer(bootstrap_servers=address, acks="all",
                                 reconnect_backoff_max_ms=1000)
        # The rejoin once the auto-created topic's metadata comes may outlast a poll, and
        # kafka-python 3.0.12 would then forget it (FORGETS_PENDING_JOIN).
        consumer = keeping_pending_join(KafkaConsumer(
            "restart", bootstrap_servers=address, group_id="g", auto_offset_reset="earliest",
            reconnect_backoff_max_ms=1000,
        ))
        try:
            seen: list[bytes] = []

            def send_and_receive(values: list[bytes]) -> None:
                for value in values:
                    producer.send("restart", value).get(60)
                deadline = time.monotonic() + 60
                while len(seen) < len(values) + sent[0] and time.monotonic() < deadline:
                    for records in consumer.poll(timeout_ms=500).values():
                        seen.extend(r.value for r in records)
                sent[0] += len(values)

            sent = [0]
            send_and_receive([b"0", b"1"])
            pid = broker.pid
            broker.restart()
            assert broker.bootstrap_servers == address and broker.pid != pid
            assert wait_gone(pid)
            send_and_receive([b"2"])
            broker.restart(kill=True)
            assert broker.bootstrap_servers == address
            send_and_receive([b"3"])
            assert seen == [b"0", b"1", b"2", b"3"]
        finally:
            consumer.close()
            producer.close()
        log_dir = broker.log_file.parent
    assert not log_dir.exists()  # a temporary directory still goes with stop()


def test_port_and_scram_arguments_are_checked():
    """port and advertised_port must be TCP ports, scram_users plain names and passwords."""
    with pytest.raises(ValueError, match=r"'port' must be a TCP port, 1 to 65535 \(got 70000\)"):
        LocalKafkaBroker(port=70000)
    with pytest.raises(ValueError, match=r"'advertised_port' must be a TCP port.*got 'x'"):
        LocalKafkaBroker(advertised_port="x")  # type: ignore[arg-type]
    with pytest.raises(BrokerStartError, match="not running"):
        LocalKafkaBroker().restart()
    with pytest.raises(ValueError, match=r"'scram_users' must map .*\(got user 'a b'\)"):
        LocalKafkaBroker(scram_users={"a b": "pw"})
    with pytest.raises(BrokerStartError, match="no SASL listener"):
        _ = LocalKafkaBroker().sasl_bootstrap_servers



@pytest.mark.integration
def test_a_first_start_finding_its_chosen_port_taken_draws_new_ports(monkeypatch):
    """Another process binds the controller port the broker chose before the JVM does: the
    JVM exits with "Address already in use", and the first start draws new ports and serves."""
    from priority_kafka.testing import _broker

    free_port = _broker._free_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        first_client = free_port()
        drawn = iter([first_client, taken.getsockname()[1]])  # the client's, the controller's
        monkeypatch.setattr(_broker, "_free_port", lambda: next(drawn, None) or free_port())
        with LocalKafkaBroker() as broker:
            assert broker._controller_port != taken.getsockname()[1]
            assert broker._port != first_client
            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
            try:
                assert admin.describe_cluster()["brokers"]
            finally:
                admin.close()
