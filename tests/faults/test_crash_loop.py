"""Fault: the consumer process is SIGKILLed again and again while records are produced, a
ShardedExecutor over a PriorityConsumer of a keyed 3-level topic (tests/executor_child.py);
after the last restart drains: nothing lost, each key in order within every run, duplicates
bounded by what each kill left received and uncommitted."""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tests.executor_child as child
from priority_kafka import create_priority_topics
from tests.faults.common import LEVELS, Producing, Tally
from tests.test_executor import spawn_child, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.integration]

PARTITIONS = 2


def keys_in_order(lines: list[str]) -> bool:
    """Within one run, each key's records come once each in increasing order."""
    last: dict[tuple[str, str], int] = {}
    for line in lines:
        level, key, seq = line.split(":")
        if int(seq) <= last.get((level, key), -1):
            return False
        last[(level, key)] = int(seq)
    return True


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_crash_loop_loses_nothing_and_keeps_key_order(
    bootstrap_servers: str, unique_name: Callable[[str], str], tmp_path: Path,
    faults_full: bool, fault_report: Any, client: str,
) -> None:
    """SIGKILL of the executor process (on either client family) 3 times (12 with
    --faults-full) while producing, then a final run: every acknowledged record handled,
    per-key order within each run, duplicates within the bound per kill."""
    kills, count, rate = (12, 30000, 800) if faults_full else (3, 6000, 600)
    topic, group = unique_name("crash"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=PARTITIONS)
    out = tmp_path / "handled.txt"
    out.touch()

    def lines() -> list[str]:
        return out.read_text().splitlines()

    tally = Tally()
    producing = Producing(bootstrap_servers, topic, tally, rate=rate, limit=count)
    runs: list[int] = []  # the line each run started at
    first_record_s: list[float] = []
    proc = None
    try:
        for kill in range(kills + 1):
            runs.append(len(lines()))
            started = time.monotonic()
            proc = spawn_child(bootstrap_servers, topic, group, out, levels=LEVELS, client=client)
            wait_for(lambda start=runs[-1]: len(lines()) > start, 60, f"run {kill} to handle")
            first_record_s.append(time.monotonic() - started)
            if kill == kills:
                break
            target = runs[-1] + random.randint(200, 600)
            wait_for(lambda target=target: len(lines()) >= target, 60, f"kill {kill}")
            proc.kill()
            proc.wait(10)
        wait_for(producing.done, 120, "the producer to send everything")
        producing.stop()
        wait_for(lambda: tally.acked <= set(lines()), 120, "every record to be handled")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
    handled = lines()
    for line in handled:
        tally.handle(line)
    figures = tally.figures()
    segments = [handled[a:b] for a, b in zip(runs, [*runs[1:], len(handled)], strict=True)]
    figures.update(
        kills=kills, runs_in_order=sum(map(keys_in_order, segments)),
        first_record_after_restart_s=round(sorted(first_record_s)[len(first_record_s) // 2], 2),
    )
    # Per kill: per partition what was received and not committed (in flight plus one poll),
    # plus what the workers completed within one commit interval.
    per_kill = LEVELS * PARTITIONS * (child.MAX_IN_FLIGHT + child.MAX_POLL_RECORDS) + (
        child.SHARDS / child.HANDLER_S * (child.COMMIT_INTERVAL_MS / 1000 + 0.2)
    )
    figures["duplicate_bound"] = round(kills * per_kill)
    fault_report(f"crash loop (SIGKILL of the consumer process, {client})", **figures)
    assert figures["produced"] == count and figures["lost"] == 0
    assert figures["runs_in_order"] == kills + 1
    assert figures["duplicates"] <= kills * per_kill
