"""Rebalance timeline: records one executor member handles per second while a second member
joins and later leaves, eager (range) against cooperative-sticky rebalancing.

A 3-level priority topic (4 partitions per level) gets steady traffic (``--rate`` records/s in
all). Member 1, a ``ShardedExecutor`` over a ``PriorityConsumer``, handles every partition;
once it has handled each one (the start, t = 0), a second member joins at ``--join-at`` s and
stops (leaving the group) at ``--leave-at`` s; the run ends at ``--end-at`` s. Member 1's handled
records are counted per 250 ms bucket (``records_per_s`` is each bucket times 4), and the longest
time without any record handled by member 1 is reported across the join (from ``join_at`` to
``leave_at``) and across the leave (from ``leave_at`` to the end). Eager is kafka-python's
default ``RangePartitionAssignor``: every rebalance revokes every partition of every member
first; cooperative is ``CooperativeStickyAssignor``: only the partitions that move are revoked.

Every run is a fresh process on a fresh topic and group; the two sides take turns for
``--rounds`` rounds (eager first in even rounds). ``gap_ratio`` is the median over the rounds of
eager / cooperative longest gap of the same round (a cooperative gap is floored at one bucket,
250 ms, so the ratio stays finite). ``rebalance_timeline.png`` draws round 0 of both sides.

    .venv/bin/python -m benchmarks.rebalance_timeline [--smoke] [--rate R] [--rounds R]
        [--join-at S] [--leave-at S] [--end-at S]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kafka import KafkaProducer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor

from benchmarks._common import (
    broker,
    interleave_sides,
    new_figure,
    parse_args,
    save_figure,
    unique,
    write_result,
)
from priority_kafka import PriorityConsumer, create_priority_topics, priority_topic
from priority_kafka.executor import ShardedExecutor

NAME = "rebalance_timeline"
LEVELS = 3
PARTITIONS = 4
BUCKET_S = 0.25
HANDLER_S = 0.002
SHARDS = 8
STRATEGIES = {"eager": RangePartitionAssignor, "cooperative": CooperativeStickyAssignor}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=480.0, help="records/s over all partitions")
    parser.add_argument("--rounds", type=int, default=3, help="runs per side")
    parser.add_argument("--join-at", type=float, default=5.0, help="second member starts (s)")
    parser.add_argument("--leave-at", type=float, default=15.0, help="second member stops (s)")
    parser.add_argument("--end-at", type=float, default=22.0, help="the run ends (s)")


class _Traffic:
    """Sends one record to every partition ``per_partition_rate`` times a second, on a thread."""

    def __init__(self, bootstrap_servers: str, topic: str, per_partition_rate: float) -> None:
        self._producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=5)
        self._targets = [
            (priority_topic(topic, level), p) for level in range(LEVELS) for p in range(PARTITIONS)
        ]
        self._interval = 1 / per_partition_rate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="traffic", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            for topic, partition in self._targets:
                self._producer.send(topic, b"x" * 100, partition=partition)
            due += self._interval
            self._stop.wait(max(0.0, due - time.monotonic()))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.close()


class _Member:
    """A ShardedExecutor over a PriorityConsumer, running on a thread."""

    def __init__(
        self, bootstrap_servers: str, topic: str, group: str, strategy: Any, times: list[float]
    ) -> None:
        consumer = PriorityConsumer(
            topic, max_priority=LEVELS, bootstrap_servers=bootstrap_servers, group_id=group,
            enable_auto_commit=False, auto_offset_reset="latest",
            partition_assignment_strategy=[strategy],
            session_timeout_ms=10_000, heartbeat_interval_ms=1_000,
        )

        def handler(record: Any) -> None:
            time.sleep(HANDLER_S)
            times.append(time.monotonic())
            self.partitions.add((record.topic, record.partition))

        self.partitions: set[tuple[str, int]] = set()
        self.executor = ShardedExecutor(consumer, handler, shards=SHARDS)
        self._thread = threading.Thread(target=self.executor.run, name="member", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.executor.stop()
        self._thread.join(60)


def _longest_gap(times: Sequence[float], start: float, end: float) -> float:
    marks = [start, *(t for t in times if start <= t <= end), end]
    return max(b - a for a, b in itertools.pairwise(marks))


def _wait(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout_s:g} s")
        time.sleep(0.05)


def join_and_leave(
    bootstrap_servers: str, new_member: Callable[[str, str, str, list[float]], Any],
    rate: float, join_at: float, leave_at: float, end_at: float,
) -> dict[str, Any]:
    """The scenario: under traffic, member 1 alone on a fresh topic and group until it has
    handled every partition (t = 0), member 2 from ``join_at`` to ``leave_at``, the end at
    ``end_at``. ``new_member(servers, topic, group, times)`` starts a member that appends the
    time of every record it handles to ``times`` and has ``partitions`` and ``stop()``.

    Returns member 1's handled times (``handled``, s since t = 0), its longest gaps across the
    join and across the leave, both members (stopped) and when member 2 started (``joined``).
    """
    topic, group = unique("rtl"), unique("rtl-g")
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=PARTITIONS)
    times: list[float] = []
    first = new_member(bootstrap_servers, topic, group, times)
    traffic = _Traffic(bootstrap_servers, topic, rate / (LEVELS * PARTITIONS))
    second: Any = None
    try:
        _wait(lambda: len(first.partitions) == LEVELS * PARTITIONS, 60, "member 1 everywhere")
        start = time.monotonic()
        _wait(lambda: time.monotonic() >= start + join_at, join_at + 1, "the join time")
        joined = time.monotonic() - start
        second = new_member(bootstrap_servers, topic, group, [])
        _wait(lambda: time.monotonic() >= start + leave_at, leave_at + 1, "the leave time")
        second.stop()
        _wait(lambda: time.monotonic() >= start + end_at, end_at + 60, "the end")
    finally:
        traffic.close()
        if second is not None:
            second.stop()  # returns at once when it already stopped
        first.stop()
    handled = [t - start for t in times if start <= t < start + end_at]
    join_gap = _longest_gap(handled, join_at, leave_at)
    leave_gap = _longest_gap(handled, leave_at, end_at)
    return {
        "handled": handled, "first": first, "second": second, "joined": joined,
        "longest_gap_s": max(join_gap, leave_gap),
        "longest_gap_join_s": join_gap,
        "longest_gap_leave_s": leave_gap,
    }


def scenario(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of a join-and-leave run, for the result document."""
    return {
        "smoke": args.smoke,
        "rate_per_s": args.rate,
        "levels": LEVELS,
        "partitions_per_level": PARTITIONS,
        "handler_ms": HANDLER_S * 1000,
        "shards": SHARDS,
        "bucket_s": BUCKET_S,
        "join_at_s": args.join_at,
        "leave_at_s": args.leave_at,
        "end_at_s": args.end_at,
        "rounds": args.rounds,
    }


def timeline_side(
    bootstrap_servers: str, side: str, rate: float, join_at: float, leave_at: float,
    end_at: float,
) -> dict[str, Any]:
    """Contender: member 1's handled records over time while member 2 joins and leaves."""
    strategy = STRATEGIES[side]
    run = join_and_leave(
        bootstrap_servers,
        lambda servers, topic, group, times: _Member(servers, topic, group, strategy, times),
        rate, join_at, leave_at, end_at,
    )
    buckets = [0] * int(end_at / BUCKET_S)
    for t in run["handled"]:
        buckets[int(t / BUCKET_S)] += 1
    return {
        "records_per_s": [count / BUCKET_S for count in buckets],
        "longest_gap_s": run["longest_gap_s"],
        "longest_gap_join_s": run["longest_gap_join_s"],
        "longest_gap_leave_s": run["longest_gap_leave_s"],
        "zero_buckets": sum(1 for count in buckets[int(join_at / BUCKET_S):] if count == 0),
        "second_member_partitions": len(run["second"].partitions),
        "handled_by_first": len(run["handled"]),
    }


def _plot(path: Any, runs: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    _, ax = new_figure(figsize=(8, 4.5))
    for side, run in runs.items():
        rates = run["records_per_s"]
        xs = [i * BUCKET_S for i in range(len(rates))]
        ax.step(xs, rates, where="post",
                label=f"{side} (longest stop {run['longest_gap_s']:.2f} s)")
    for at, what in ((args.join_at, "member 2 joins"), (args.leave_at, "member 2 leaves")):
        ax.axvline(at, color="grey", linestyle="--")
        ax.annotate(what, (at, 0), xytext=(3, 3), textcoords="offset points", fontsize=8)
    ax.set_xlabel("seconds since member 1 handled every partition")
    ax.set_ylabel(f"member 1 records handled per s ({BUCKET_S * 1000:.0f} ms buckets)")
    ax.set_title(f"Member 1 across a join and a leave, {args.rate:g} records/s offered")
    ax.grid(True, alpha=0.3)
    ax.legend()
    save_figure(ax.figure, path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    if args.smoke:
        args.rounds, args.join_at, args.leave_at, args.end_at = 1, 1.0, 4.0, 6.0
    with broker(args) as servers:
        runs = interleave_sides(
            timeline_side, tuple(STRATEGIES), args.rounds, bootstrap_servers=servers,
            rate=args.rate, join_at=args.join_at, leave_at=args.leave_at, end_at=args.end_at,
        )
    gaps = {side: runs.values(side, "longest_gap_s") for side in STRATEGIES}
    floored = [max(gap, BUCKET_S) for gap in gaps["cooperative"]]
    ratios = [e / c for e, c in zip(gaps["eager"], floored, strict=True)]
    _plot(args.out / f"{NAME}.png", {side: runs.results[side][0] for side in STRATEGIES}, args)
    result = {
        **scenario(args),
        "longest_gap_s": {side: statistics.median(g) for side, g in gaps.items()},
        "longest_gap_per_round": gaps,
        "longest_gap_join_s": {s: runs.values(s, "longest_gap_join_s") for s in STRATEGIES},
        "longest_gap_leave_s": {s: runs.values(s, "longest_gap_leave_s") for s in STRATEGIES},
        "zero_buckets": {s: runs.values(s, "zero_buckets") for s in STRATEGIES},
        "gap_ratio": statistics.median(ratios),
        "gap_ratio_per_round": ratios,
        "timelines": {s: runs.values(s, "records_per_s") for s in STRATEGIES},
        "interleaving": runs.summary(),
        "plots": [f"{NAME}.png"],
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
