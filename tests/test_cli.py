"""`priority-kafka run`: the executor as a service, stopped gracefully by SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from priority_kafka import PriorityProducer, create_priority_topics
from priority_kafka.cli import main

pytestmark = pytest.mark.integration
TESTS = Path(__file__).resolve().parent


def test_run_handles_records_and_commits_on_sigterm(bootstrap_servers, unique_name, tmp_path):
    """Every record is handled; SIGTERM stops the service with exit 0 and all offsets committed."""
    topic, group = unique_name("orders"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, 3)
    with PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=3) as p:
        for i in range(300):
            p.send(topic, b"x", key=str(i % 7).encode(), priority=i % 3)
    out = tmp_path / "handled.txt"
    process = subprocess.Popen(
        [sys.executable, "-m", "priority_kafka", "run", "cli_handler:handle", "-t", topic,
         "-b", bootstrap_servers, "-g", group, "--max-priority", "3", "--shards", "4"],
        env={**os.environ, "CLI_HANDLER_OUT": str(out), "PYTHONPATH": str(TESTS)},
        stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().splitlines()) >= 300:
                break
            assert process.poll() is None, process.stderr.read()
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
    handled = out.read_text().splitlines()
    assert len(set(handled)) == 300
    check = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=f"{group}-1")
    try:
        assert check.committed(TopicPartition(f"{topic}-1", 0)) == 100
    finally:
        check.close()


def test_run_rejects_a_handler_that_cannot_be_loaded(capsys):
    """A bad handler spec stops the CLI with a message naming it."""
    with pytest.raises(SystemExit):
        main(["run", "no_such_module:f", "-t", "t", "-b", "x:1", "-g", "g"])
    assert "cannot load handler 'no_such_module:f'" in capsys.readouterr().err
