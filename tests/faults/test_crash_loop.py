"""Fault: the consumer process is SIGKILLed again and again while records are produced, a
ShardedExecutor over a PriorityConsumer of a keyed 3-level topic (benchmarks/executor_child.py);
after the last restart drains: nothing lost, each key in order within every run, and no record
that a commit covered at a kill (below its watermark, or in its offset map) handled again:
duplicates are only records that finished between the last commit and the kill. On the
synchronous families the child runs ``executor.run()``; on a family whose consumer lives on the
caller's loop (aiokafka), ``await executor.run_async()`` in ``asyncio.run`` with an ``async def``
handler, and with a plain ``def`` handler (run on the worker threads).

With ``--faults-full`` the loop also runs with the offset map off (the commit is the watermark
alone), for the figures before and after it (docs/reliability.md)."""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from benchmarks._running import wait_for
from benchmarks._traffic import LEVELS, Producing, Tally
from priority_kafka import create_priority_topics
from priority_kafka.commit_plan import CommitPlan
from priority_kafka.families import family as registered
from priority_kafka.naming import level_group_id, priority_topic
from priority_kafka.offset_map import decode_offset_map
from tests.conftest import over_families
from tests.test_executor import spawn_child

pytestmark = [pytest.mark.faults, pytest.mark.integration]

# The scenario of issue 24 (docs/reliability.md): 3 levels x 4 partitions, 16 shards, a 1 ms
# handler, commits every 200 ms.
PARTITIONS = 4
SHARDS = 16
HANDLER_MS = 1
COMMIT_INTERVAL_MS = 200
CHILD_OPTIONS = ("--shards", str(SHARDS), "--handler-ms", str(HANDLER_MS),
                 "--commit-interval-ms", str(COMMIT_INTERVAL_MS))

Where = tuple[str, int, int]  # topic, partition, offset


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # The watermark-only loop is the "before" figure: full size only, it adds nothing to CI.
    if "offset_map" in metafunc.fixturenames:
        full = metafunc.config.getoption("--faults-full") or os.environ.get(
            "PRIORITY_KAFKA_FAULTS_FULL", "") not in ("", "0")
        metafunc.parametrize("offset_map", [True, False] if full else [True],
                             ids=lambda on: "offset-map" if on else "watermark-only")


class KillLoop:
    """Runs of benchmarks/executor_child.py appending to one file: each SIGKILLed once it handled a
    random number of records within ``handled_before_kill``, ``kills`` times, then a last run
    left running for :meth:`finish`. :meth:`close` kills a process still running (after a
    failure)."""

    def __init__(
        self, out: Path, start: Callable[[], subprocess.Popen[str]],
        handled_before_kill: tuple[int, int] = (200, 600),
    ) -> None:
        self.out = out
        self._start = start
        self._handled_before_kill = handled_before_kill
        self.proc: subprocess.Popen[str] | None = None
        self.runs: list[int] = []  # the line each run started at
        self.first_record_s: list[float] = []  # from each start to its first record

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines()

    def run(
        self, kills: int, during: Callable[[int], None] = lambda run: None,
        after_kill: Callable[[], None] = lambda: None,
    ) -> None:
        """Start, kill and start again; ``during(run)`` once each run handles, and
        ``after_kill()`` once each killed process is gone."""
        for kill in range(kills + 1):
            self.runs.append(len(self.lines()))
            started = time.monotonic()
            self.proc = self._start()
            self.wait(lambda start=self.runs[-1]: len(self.lines()) > start, 90,
                      f"run {kill} to handle")
            self.first_record_s.append(time.monotonic() - started)
            during(kill)
            if kill == kills:
                return
            target = self.runs[-1] + random.randint(*self._handled_before_kill)
            self.wait(lambda target=target: len(self.lines()) >= target, 90, f"kill {kill}")
            self.proc.kill()
            self.proc.wait(10)
            after_kill()

    def finish(self, producing: Producing, tally: Tally) -> None:
        """Wait until everything acknowledged is handled; stop the last run gracefully."""
        assert self.proc is not None
        wait_for(producing.done, 180, "the producer to send everything")
        producing.stop()
        self.wait(lambda: tally.acked <= set(self.lines()), 180, "every record to be handled")
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(60) == 0

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """wait_for, and when it times out, the running process's thread stacks on stderr
        (SIGUSR1: benchmarks/executor_child.py's faulthandler) before the AssertionError."""
        try:
            wait_for(condition, timeout, what)
        except AssertionError:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGUSR1)
                time.sleep(1)  # the handler writes at once; then close() may kill it
            raise

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def keys_in_order(lines: list[str]) -> bool:
    """Within one run, each key's records come once each in increasing order."""
    last: dict[tuple[str, str], int] = {}
    for line in lines:
        level, key, seq = line.split(":")
        if int(seq) <= last.get((level, key), -1):
            return False
        last[(level, key)] = int(seq)
    return True


def commits(bootstrap: str, group: str) -> dict[tuple[str, int], CommitPlan]:
    """What each level's group has committed now: watermark and offset map per partition."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        groups = [level_group_id(group, level) for level in range(LEVELS)]
        found = admin.list_group_offsets(dict.fromkeys(groups))
    finally:
        admin.close()
    plans = {}
    for offsets in found.values():
        for tp, meta in offsets.items():
            decoded = decode_offset_map(meta.metadata, meta.offset)
            assert decoded.problem is None, decoded.problem
            plans[(tp.topic, tp.partition)] = CommitPlan(meta.offset, "", decoded.map.ranges)
    return plans


def coordinates(bootstrap: str, topic: str) -> dict[str, Where]:
    """Where each value of the priority topics of ``topic`` is stored."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(priority_topic(topic, level), p)
                      for level in range(LEVELS) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        found: dict[str, Where] = {}
        deadline = time.monotonic() + 120
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, "reading the topics back took over 120 s"
            for tp, records in consumer.poll(timeout_ms=500).items():
                for record in records:
                    found[record.value.decode()] = (tp.topic, tp.partition, record.offset)
        return found
    finally:
        consumer.close()


@over_families("synchronous", argname="client")
def test_crash_loop_loses_nothing_and_keeps_key_order(
    bootstrap_servers: str, unique_name: Callable[[str], str], tmp_path: Path,
    faults_full: bool, fault_report: Any, client: str, offset_map: bool,
) -> None:
    """SIGKILL of the executor process (on either client family) 3 times (12 with
    --faults-full) while producing, then a final run: every acknowledged record handled,
    per-key order within each run, and no record covered by the commits found after a kill
    handled again (with the offset map, what finished above the watermark is covered too)."""
    kills, count, rate = (12, 30000, 800) if faults_full else (3, 6000, 600)
    crash_loop(bootstrap_servers, unique_name, tmp_path, fault_report, client, offset_map,
               kills, count, rate, faults_full)


@over_families("caller_loop", argname="client")
@pytest.mark.parametrize("handler", ["async", "def"])
def test_crash_loop_on_the_callers_loop_loses_nothing_and_keeps_key_order(
    bootstrap_servers: str, unique_name: Callable[[str], str], tmp_path: Path,
    faults_full: bool, fault_report: Any, client: str, offset_map: bool, handler: str,
) -> None:
    """The same loop with the executor in the child's event loop (``await
    executor.run_async()`` over the aio PriorityConsumer): with an ``async def`` handler (tasks
    of the loop) SIGKILL twice, with a plain ``def`` one (the worker threads, the commits and
    pauses still on the loop) once; 12 times each with --faults-full; the same invariants.
    Smaller by default than the synchronous families' (CI time): the path the kill interrupts
    differs, the checks not."""
    kills, count, rate = (
        (12, 30000, 800) if faults_full else (2, 1800, 600) if handler == "async"
        else (1, 1200, 600)
    )
    crash_loop(bootstrap_servers, unique_name, tmp_path, fault_report, client, offset_map,
               kills, count, rate, faults_full, sync_handler=handler == "def")


def crash_loop(
    bootstrap_servers: str, unique_name: Callable[[str], str], tmp_path: Path,
    fault_report: Any, client: str, offset_map: bool, kills: int, count: int, rate: int,
    faults_full: bool, sync_handler: bool = False,
) -> None:
    """``kills`` SIGKILLs of benchmarks/executor_child.py on ``client`` while ``count`` records
    are produced at ``rate``/s, then a final run; the figures reported and checked
    (``sync_handler``: the child's ``--sync-handler``)."""
    # Each run is killed after handling 1-3 s of production (full size): past the catch-up of
    # what came in while it was down, after several commits, as a crash in steady operation.
    # Never more than all the runs can reach: 12 x 3 s of 800/s is below 30,000.
    handled_before_kill = (rate, rate * 3) if faults_full else (rate // 2, rate * 3 // 2)
    topic, group = unique_name("crash"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=PARTITIONS)
    out = tmp_path / "handled.txt"
    out.touch()
    options = (CHILD_OPTIONS + (() if offset_map else ("--no-offset-map",))
               + (("--sync-handler",) if sync_handler else ()))
    loop = KillLoop(out, lambda: spawn_child(bootstrap_servers, topic, group, out,
                                             levels=LEVELS, client=client, extra=options),
                    handled_before_kill)
    tally = Tally()
    producing = Producing(bootstrap_servers, topic, tally, rate=rate, limit=count)
    covered_at_kill: list[dict[tuple[str, int], CommitPlan]] = []
    try:
        # Once a process is gone, its group's commits are exactly what the next run starts
        # from.
        loop.run(kills, after_kill=lambda: covered_at_kill.append(
            commits(bootstrap_servers, group)))
        loop.finish(producing, tally)
    finally:
        loop.close()
    handled, runs = loop.lines(), loop.runs
    for line in handled:
        tally.handle(line)
    figures = tally.figures()
    bounds = [*runs[1:], len(handled)]
    segments = [handled[a:b] for a, b in zip(runs, bounds, strict=True)]
    where = coordinates(bootstrap_servers, topic)
    # A record handled again in run k + 1 or later must not have been covered at kill k
    # (commits only move forward), and no more can come again than what had finished
    # uncovered by then.
    seen: set[str] = set()
    replayed_covered = 0
    finished_uncovered = 0
    for kill, plans in enumerate(covered_at_kill):
        seen.update(segments[kill])
        finished_uncovered += sum(
            not plans.get(where[v][:2], CommitPlan(0)).covers(where[v][2]) for v in seen
        )
        later = Counter(line for segment in segments[kill + 1:] for line in segment)
        replayed_covered += sum(
            1 for v in later if v in seen and plans.get(where[v][:2], CommitPlan(0)).covers(
                where[v][2])
        )
    figures.update(
        offset_map=offset_map, kills=kills, runs_in_order=sum(map(keys_in_order, segments)),
        first_record_after_restart_s=round(statistics.median(loop.first_record_s), 2),
        replayed_covered=replayed_covered, finished_uncovered_at_kills=finished_uncovered,
    )
    # The aio family's executor runs in the child's loop (run_async()), the others' on a thread.
    how = (f"{client}, run_async{', def handler' if sync_handler else ''}"
           if registered(client).caller_loop else client)
    fault_report(
        f"crash loop (SIGKILL of the consumer process, {how}"
        f"{'' if offset_map else ', watermark only'})", **figures,
    )
    assert figures["produced"] == count and figures["lost"] == 0
    assert figures["runs_in_order"] == kills + 1
    assert replayed_covered == 0
    assert figures["duplicates"] <= finished_uncovered
