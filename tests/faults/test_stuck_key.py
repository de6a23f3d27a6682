"""Fault: in "key" ordering a handler blocks on one record indefinitely. Other keys go on until
the partition holds max_in_flight_per_partition records received past the commit watermark
(which stays at the stuck record); then it pauses, so what a crash would replay stays bounded
(docs/executor.md, "Hot and stuck keys"), and the stuck record is logged once as a warning."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka.structs import TopicPartition

from benchmarks._running import Running, wait_for
from benchmarks._traffic import LEVELS, Producing, Tally
from priority_kafka import create_priority_topics
from priority_kafka.executor import ShardedExecutor
from tests.conftest import over_families
from tests.faults.common import client_consumer
from tests.test_executor import committed

pytestmark = [pytest.mark.faults, pytest.mark.integration]

MAX_IN_FLIGHT, MAX_POLL_RECORDS = 300, 100


@over_families("synchronous", argname="client")
def test_a_stuck_key_bounds_the_replay_and_is_warned_about(
    bootstrap_servers: str, unique_name: Callable[[str], str], faults_full: bool,
    fault_report: Any, caplog: pytest.LogCaptureFixture, client: str,
) -> None:
    """With one record stuck, records received past the commit watermark of its partition stay
    within max_in_flight_per_partition + max_poll_records while other keys are handled, and
    the stuck record is logged as a warning; on either client (confluent's adapter parks a
    paused partition's records instead of handing them over)."""
    caplog.set_level(logging.WARNING, logger="priority_kafka.executor")
    count, watch_s = (30000, 20.0) if faults_full else (6000, 3.0)
    topic, group = unique_name("stuck"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, LEVELS)
    tally = Tally()
    producing = Producing(bootstrap_servers, topic, tally, rate=1e9, limit=count)
    wait_for(producing.done, 120, "the records to be sent")
    producing.stop()
    stuck_value, release = "0:0:5", threading.Event()
    offsets: dict[str, int] = {}
    lock = threading.Lock()

    def handler(record: Any) -> None:
        value = record.value.decode()
        with lock:
            offsets[value] = record.offset
        if value == stuck_value:
            release.wait()
        tally.handle(value)

    executor = ShardedExecutor(
        client_consumer(client, bootstrap_servers, topic, group, MAX_POLL_RECORDS),
        handler, shards=4, ordering="key", commit_interval_ms=100, stuck_warning_ms=500,
        max_in_flight_per_partition=MAX_IN_FLIGHT,
    )
    run = Running(executor)
    try:
        wait_for(lambda: stuck_value in offsets, 60, "the stuck record to start")
        stuck_tp = TopicPartition(f"{topic}-0", 0)
        wait_for(lambda: executor.stats().paused_partitions >= 1, 60, "its partition to pause")
        # Levels 1 and 2 are not stuck: once they are done, queued and running records are
        # all of the stuck partition.
        others = {v for v in tally.acked if not v.startswith("0:")}
        wait_for(lambda: others <= tally.first_handled.keys(), 120, "the other levels")

        def replay() -> int:
            """Records of the stuck partition received at or past its watermark."""
            stats = executor.stats()
            with lock:
                done_after = sum(1 for v, o in offsets.items()
                                 if v.startswith("0:") and o > offsets[stuck_value])
            return done_after + stats.queued + stats.running

        worst, deadline = 0, time.monotonic() + watch_s
        while time.monotonic() < deadline:  # a measurement window, not a synchronisation
            worst = max(worst, replay())
            time.sleep(0.05)
        group_offsets = committed(bootstrap_servers, f"{group}-0")
        warnings = [r.getMessage() for r in caplog.records
                    if "commits of its partition wait for it" in r.getMessage()]
        stats = executor.stats()
    finally:
        release.set()
    run.stop()
    assert run.error is None
    bound = MAX_IN_FLIGHT + MAX_POLL_RECORDS
    fault_report(f"stuck key (one handler blocked, ordering='key', {client})", produced=count,
                 replay_worst=worst, replay_bound=bound, watched_s=watch_s,
                 stuck_warnings=stats.stuck_warnings, lost=0)
    assert group_offsets.get(stuck_tp, 0) <= offsets[stuck_value]  # the watermark waits for it
    assert 0 < worst <= bound
    assert stats.stuck_warnings == 1 and len(warnings) == 1, warnings
