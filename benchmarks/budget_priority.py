"""Budgets against a real rate-limited downstream: urgent latency, seconds over budget, shares,
two processes of one group, recovery after a throttle.

The downstream (:mod:`benchmarks._downstream`) is a local HTTP server on loopback, started by
each run in its own process, answering 429 (with ``Retry-After``) past ``--limit`` requests/s
(its bucket holding ``--downstream-burst`` seconds of them: with the default 0.05 it accepts no
1 s window above 1.05 x the limit itself, so only a longer one tests the seconds over budget);
the handler makes one HTTP request per record on its worker (``--shards`` workers), so the
executor outruns the downstream when ``shards / handler time`` exceeds the limit. The level-0
flood holds ``--flood`` records (100 keys). ``--case``:

- ``urgent`` (the issue's case): only level 0 flooded; once the executor runs, level-2 records
  are produced at ``--urgent-rate``/s, stamped. Level-2 latency (stamp to accepted call) against
  the bound ``2 x handler p99 + 1 / limit``.
- ``shares``: every level flooded with ``--flood`` records, so every level wants more than its
  share: each level's share of the accepted calls after ``--warmup`` s, against its reserved
  share of the budget.
- ``group``: every level flooded, 4 partitions a level; sides ``one`` (one process) and ``two``
  (a second process, started first, in the same group): the accepted calls/s at the downstream
  after ``--warmup`` s, together, against the limit.
- ``recovery``: only level 0 flooded; ``--outage-at`` s into the span the downstream refuses
  every call for ``--outage`` s (``Retry-After``: the rest of the outage): how long after the
  outage the budget's rate is back at the limit, and the downstream's accepted calls/s back at
  95 % of what they were before it.

Sides ``budgets`` (``Budgets({"downstream": limit})``; a 429 raises ``Throttled``) and ``none``
(the same executor; a 429 raises an error the retry policy backs off from: 429s and backoffs
decide), each run in a fresh process, taking turns for ``--rounds`` rounds. Per run: the
accepted calls per 1 s window and how many were above 1.05 x the limit, the 429s, the handler
time (accepted calls), each level's share of the accepted calls; the load average before every
run is under ``interleaving``.

    .venv/bin/python -m benchmarks.budget_priority [--smoke] [--case C] [--flood N] [--limit R]
        [--urgent-rate R] [--seconds S] [--rounds R] [--shards N] [--warmup S]
        [--outage-at S] [--outage S] [--downstream-burst S] [--burst N] [--downstream-ms MS]
        [--urgent-keys N] [--catch-up S] [--trace]
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import statistics
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import _common
from benchmarks._budget_trace import Trace
from benchmarks._consumers import Pacer, is_stamped, latency_summary, low_latency_producer, stamp_of
from benchmarks._downstream import Downstream, call
from benchmarks._executor import executor_consumer
from benchmarks._running import Running
from priority_kafka import Budget, Budgets, Throttled, create_priority_topics, priority_topic
from priority_kafka.budgets import TokenBudget
from priority_kafka.executor import ShardedExecutor

NAME = "budget_priority"
SIDES = {"urgent": ("budgets", "none"), "shares": ("budgets", "none"), "group": ("one", "two"),
         "recovery": ("budgets", "none")}
LEVELS = 3
SHARDS = 32
KEYS = 100
GROUP_PARTITIONS = 4


class Refused(Exception):
    """A 429 without budgets: the retry policy backs off."""


class Member:
    """One process's executor calling the downstream, and what its accepted calls were."""

    def __init__(self, servers: str, topic: str, port: int, *, budgets: bool, limit: float,
                 shards: int, group: str, burst: int, trace: bool = False,
                 catch_up: float | None = None) -> None:
        self._port = port
        self._budgets = budgets
        self._level_of = {priority_topic(topic, level): level for level in range(LEVELS)}
        self._local = threading.local()
        self._lock = threading.Lock()
        #: (monotonic time, level) of each accepted call; handler seconds; level-2 latencies.
        self.calls: list[tuple[float, int]] = []
        #: When each call the downstream accepted was started (this process's monotonic clock).
        self.starts: list[float] = []
        self.handler_s: list[float] = []
        self.latencies: list[float] = []
        #: 429s per level (a refused call is made again: with budgets, on a new token).
        self.refused: Counter[int] = Counter()
        self.started = threading.Event()
        consumer = executor_consumer("kafka-python", servers, [topic], levels=True,
                                     overrides={"group_id": group})
        self.reserved = _reserved(consumer.levels.reserved, limit)
        self.executor = ShardedExecutor(
            consumer, self.handler, shards=shards,
            budgets=Budgets({"downstream": Budget(limit, **_budget_options(burst, catch_up))})
            if budgets else None,
            max_attempts=1_000_000, retry_backoff_ms=50, retry_backoff_max_ms=1000,
            max_in_flight_per_partition=2000,
        )
        #: Where each stamped record spent its time (``--trace``), or None.
        self.trace = Trace(self.executor, time.perf_counter) if trace else None

    def handler(self, record: Any) -> None:
        self.started.set()
        if self.trace is not None:
            self.trace.handler_started(record)
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = http.client.HTTPConnection("127.0.0.1",
                                                                             self._port)
        began, began_at = time.perf_counter(), time.monotonic()
        status, retry_after, body = call(self._port, "/call", connection)
        if status == 429:
            with self._lock:
                self.refused[self._level_of[record.topic]] += 1
            if self._budgets:
                raise Throttled(retry_after=retry_after)
            raise Refused(retry_after)
        now = time.perf_counter()
        level = self._level_of[record.topic]
        with self._lock:
            self.calls.append((time.monotonic(), level))
            self.starts.append(began_at)
            self.handler_s.append(now - began)
            if level == LEVELS - 1 and is_stamped(record.value):
                self.latencies.append(now - stamp_of(record.value))
        if self.trace is not None:
            self.trace.handler_ended(record, float(body))

    def shares(self, since: float, until: float) -> dict[str, float]:
        """Each level's share of this member's accepted calls in [since, until)."""
        during = Counter(level for t, level in self.calls if since <= t < until)
        total = sum(during.values()) or 1
        return {str(level): during[level] / total for level in reversed(range(LEVELS))}


def _budget_options(burst: int, catch_up: float | None) -> dict[str, Any]:
    """The Budget options given (``burst`` 0 and ``catch_up`` None: its defaults)."""
    options: dict[str, Any] = {"burst": burst} if burst else {}
    if catch_up is not None:
        options["catch_up_s"] = catch_up
    return options


def _most_in_1s(times: list[float]) -> int:
    """The most of ``times`` (sorted) in any span ``(t - 1, t]``."""
    most, first = 0, 0
    for index, t in enumerate(times):
        while times[first] <= t - 1:
            first += 1
        most = max(most, index - first + 1)
    return most


def _reserved(weights: Any, limit: float) -> dict[str, float]:
    """Each level's reserved share of a budget of ``limit`` (its tokens of a period)."""
    budget = TokenBudget(Budget(limit), weights, 0.0)
    return {str(level): tokens / budget.tokens for level, tokens in budget.reserved.items()}


def _second_member(servers: str, topic: str, port: int, limit: float, shards: int,
                   group: str, burst: int, catch_up: float | None, started: Any, stop: Any,
                   out: Any) -> None:
    """The group case's other process: a budgeted member until ``stop``; sends its figures."""
    member = Member(servers, topic, port, budgets=True, limit=limit, shards=shards, group=group,
                    burst=burst, catch_up=catch_up)
    with Running(member.executor) as running:
        if running.wait(member.started, 120):
            started.set()
        stop.wait(600)
        rate = member.executor.budget_stats()["downstream"][0].rate
    out.send({"calls": len(member.calls), "rate": rate, "starts": member.starts})


def _recovery(downstream: Downstream, member: Member, start: float, seconds: float,
              outage_at: float, outage: float) -> tuple[float, list[tuple[float, float]]]:
    """Run the span with an outage ``outage_at`` s into it; the outage's end and the budget's
    rate every 20 ms (nothing without budgets)."""
    rates: list[tuple[float, float]] = []
    outage_end = float("nan")
    while (now := time.monotonic()) < start + seconds:
        if outage_end != outage_end and now >= start + outage_at:
            downstream.outage(outage)
            outage_end = time.monotonic() + outage
        stats = member.executor.budget_stats()
        if stats:
            rates.append((now, stats["downstream"][0].rate))
        time.sleep(0.02)
    return outage_end, rates


def _recovery_figures(limit: float, accepted: list[float], start: float, outage_at: float,
                      outage_end: float, rates: list[tuple[float, float]],
                      warmup: float) -> dict[str, Any]:
    before = [t for t in accepted if start + warmup <= t < start + outage_at]
    rate_before = len(before) / max(1e-9, outage_at - warmup)
    # The first accepted call after the outage from which the last second held 95 % of that.
    after = [t for t in accepted if t >= outage_end]
    back = next((t for i, t in enumerate(after)
                 if t - 1 >= outage_end and sum(1 for u in after[:i + 1] if u > t - 1)
                 >= 0.95 * rate_before), None)
    low = [rate for t, rate in rates if t >= outage_end - 1e-3]
    full = next((t for t, rate in rates if t >= outage_end and rate >= limit - 1e-6), None)
    return {
        "accepted_per_s_before": round(rate_before, 1),
        "downstream_back_s": None if back is None else round(back - outage_end, 2),
        "budget_rate_lowest": min(low) if low else None,
        "budget_full_rate_s": None if full is None else round(full - outage_end, 2),
    }


def run_side(bootstrap_servers: str, side: str, case: str, flood: int, limit: float,
             urgent_rate: float, seconds: float, shards: int, warmup: float, outage_at: float,
             outage: float, downstream_burst: float, burst: int, downstream_ms: float = 0.0,
             urgent_keys: int = 0, trace: bool = False, catch_up: float | None = None
             ) -> dict[str, Any]:
    """Contender: fresh topics, the downstream, ``seconds`` of the case's load."""
    topic = _common.unique("budget")
    partitions = GROUP_PARTITIONS if case == "group" else 1
    # --trace reads when the broker appended each record (LogAppendTime) off the record.
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=partitions,
                           topic_configs={"message.timestamp.type": "LogAppendTime"}
                           if trace else None)
    flooded = range(LEVELS) if case in ("shares", "group") else (0,)
    _common.preload(bootstrap_servers, [priority_topic(topic, level) for level in flooded],
                    flood, key_count=KEYS)
    group = _common.unique("budget-group")
    context = multiprocessing.get_context("spawn")
    second: dict[str, Any] = {}
    with Downstream(limit, downstream_burst, downstream_ms / 1000) as downstream:
        if side == "two":
            started, stop = context.Event(), context.Event()
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_second_member, args=(
                bootstrap_servers, topic, downstream.port, limit, shards, group, burst, catch_up,
                started, stop, send), daemon=True)
            process.start()
            if not started.wait(120):
                raise TimeoutError("the second member handled no record within 120 s")
        member = Member(bootstrap_servers, topic, downstream.port, budgets=side != "none",
                        limit=limit, shards=shards, group=group, burst=burst, trace=trace,
                        catch_up=catch_up)
        pacer = None if case != "urgent" else Pacer(
            low_latency_producer(bootstrap_servers), priority_topic(topic, LEVELS - 1),
            lambda: 1 / urgent_rate, keys=urgent_keys)
        try:
            with Running(member.executor) as running:
                if not running.wait(member.started, 60):
                    raise TimeoutError("no record within 60 s")
                start, cpu_start = time.monotonic(), time.process_time()
                if pacer is not None:
                    pacer.start()
                if case == "recovery":
                    outage_end, rates = _recovery(downstream, member, start, seconds,
                                                  outage_at, outage)
                else:
                    time.sleep(min(warmup, seconds))  # the measured span
                    warm = member.executor.budget_stats()
                    time.sleep(max(0.0, seconds - warmup))
                end, cpu_s = time.monotonic(), time.process_time() - cpu_start
                stats = member.executor.budget_stats()
        finally:
            if pacer is not None:
                pacer.finish()
            if side == "two":
                stop.set()
                second = receive.recv() if receive.poll(60) else {"error": "no figures"}
                process.join(60)
        accepted, refused = downstream.stats()
    windows = Counter(int(t - start) for t in accepted if start <= t < end)
    per_second = [windows.get(i, 0) for i in range(int(end - start))]
    steady = per_second[int(warmup):]
    result: dict[str, Any] = {
        "latency_2": latency_summary(member.latencies),
        "handler": latency_summary(member.handler_s),
        "accepted_per_s": per_second,
        "accepted_per_s_after_warmup": round(statistics.fmean(steady), 1) if steady else None,
        "over_limit_after_warmup": round(statistics.fmean(steady) / limit - 1, 4)
        if steady else None,
        "seconds_over": sum(1 for n in per_second if n > 1.05 * limit),
        # This process's CPU seconds in the span (every thread), and its accepted calls per
        # CPU second: the load average distorts wall rates, less so CPU time.
        "cpu_s": round(cpu_s, 2),
        "accepted_per_cpu_s": round(sum(per_second) / max(cpu_s, 1e-9), 1),
        # The calls as the client started them (both processes' with --case group): the
        # downstream's own 1 s windows also hold its own process's scheduling.
        "most_started_in_1s": _most_in_1s(sorted(
            [t for t in member.starts if start <= t < end]
            + [t for t in second.get("starts", ()) if start <= t < end])),
        "refused_429": refused,
        "refused_per_level": {str(level): member.refused[level]
                              for level in reversed(range(LEVELS))},
        "shares": member.shares(start + warmup, end),
        "reserved": member.reserved,
        "budget": {name: {str(lv): {"records": s.records, "wait_s": round(s.wait_s, 3),
                                    "rate": s.rate, "throttles": s.throttles}
                          for lv, s in by_level.items()} for name, by_level in stats.items()},
    }
    handler_p99 = result["handler"]["p99_ms"]
    result["bound_2_ms"] = 2 * handler_p99 + 1000 / limit
    if case != "recovery" and stats:
        # Each level's share of the tokens granted after the warm-up (a refused call's retry
        # takes one too), against its share of the accepted calls above.
        granted = {str(level): spend.tokens - warm["downstream"][level].tokens
                   for level, spend in stats["downstream"].items()}
        result["granted_shares"] = {level: round(n / max(1, sum(granted.values())), 4)
                                    for level, n in granted.items()}
    if member.trace is not None:
        result["trace"] = member.trace.summary(start + warmup, end)
    if side == "two":
        result["second_member"] = {key: second.get(key) for key in ("calls", "rate", "error")}
    if case == "recovery":
        result["recovery"] = _recovery_figures(limit, accepted, start, outage_at, outage_end,
                                               rates, warmup)
    return result


#: The benchmark's own options: flag, type, default, help.
_OPTIONS = (
    ("--flood", int, 50_000, "level-0 records (every level's with --case shares or group)"),
    ("--limit", float, 200.0, "downstream requests/s"),
    ("--urgent-rate", float, 20.0, "level-2 records/s (--case urgent)"),
    ("--seconds", float, 30.0, "measured span per run"),
    ("--rounds", int, 3, "runs per side"),
    ("--shards", int, SHARDS, "the executor's workers"),
    ("--warmup", float, 3.0, "seconds of the span left out of the shares and steady rates"),
    ("--outage-at", float, 8.0, "seconds into the span the outage starts (--case recovery)"),
    ("--outage", float, 1.0, "seconds the downstream refuses every call (--case recovery)"),
    ("--downstream-burst", float, 0.05, "seconds of its rate the downstream's bucket holds"),
    ("--burst", int, 0, "the budget's bucket, in tokens (0: Budget's default, 20 ms of it)"),
    ("--downstream-ms", float, 0.0, "how long the downstream takes to answer an accepted call"),
    ("--urgent-keys", int, 0, "level-2 records' distinct keys, by turns (0: no key: one lane)"),
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--case", choices=sorted(SIDES), default="urgent",
                        help="what to measure (see the module doc)")
    for flag, kind, default, text in _OPTIONS:
        parser.add_argument(flag, type=kind, default=default, help=text)
    parser.add_argument("--catch-up", type=float, default=None,
                        help="the budget's catch_up_s (default: Budget's)")
    parser.add_argument("--trace", action="store_true",
                        help="where each level-2 record spent its time (--case urgent)")


def _plot(results: dict[str, list[dict[str, Any]]], limit: float, path: Path) -> None:
    """Accepted calls per second at the downstream, every run of each side, and the limit."""
    fig, ax = _common.new_figure(figsize=(8, 4))
    for side, style in zip(results, ("-", "--"), strict=True):
        for index, run in enumerate(results[side]):
            ax.plot(run["accepted_per_s"], style, label=f"{side} round {index + 1}")
    ax.axhline(limit * 1.05, color="grey", linewidth=0.8, label="1.05 x limit")
    ax.set_xlabel("second of the measured span")
    ax.set_ylabel("accepted calls / s")
    ax.legend(fontsize="small")
    _common.save_figure(fig, path)


def _summary(case: str, results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The case's figures per side and round."""
    def each(key: str) -> dict[str, list[Any]]:
        return {side: [run[key] for run in runs] for side, runs in results.items()}

    summary: dict[str, Any] = {
        "seconds_over": each("seconds_over"), "refused_429": each("refused_429"),
        "accepted_per_s_after_warmup": each("accepted_per_s_after_warmup"),
    }
    if case == "urgent":
        p99 = {side: [run["latency_2"]["p99_ms"] for run in runs]
               for side, runs in results.items()}
        summary["p99_ms"] = p99
        summary["bound_2_ms"] = each("bound_2_ms")
        summary["p99_ratio_none_over_budgets"] = [
            n / b for n, b in zip(p99["none"], p99["budgets"], strict=True)]
    if case == "shares":
        summary["share_points_off_reserved"] = {
            side: [{level: round(100 * (run["shares"][level] - share), 1)
                    for level, share in run["reserved"].items()} for run in runs]
            for side, runs in results.items()}
    if case == "group":
        summary["over_limit_after_warmup"] = each("over_limit_after_warmup")
    if case == "recovery":
        summary["recovery"] = each("recovery")
    return summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = _common.parse_args(__doc__ or NAME, argv, _add_arguments)
    if args.smoke:
        args.flood, args.seconds, args.rounds, args.shards = 2000, 4.0, 1, 8
    settings = {key: getattr(args, key) for key in (
        "case", "flood", "limit", "urgent_rate", "seconds", "shards", "warmup", "outage_at",
        "outage", "downstream_burst", "burst", "downstream_ms", "urgent_keys", "trace", "catch_up")}
    with _common.broker(args) as servers:
        runs = _common.interleave_sides(run_side, SIDES[args.case], args.rounds,
                                        bootstrap_servers=servers, **settings)
    result = {
        "smoke": args.smoke,
        "settings": settings,
        "per_round": runs.results,
        **_summary(args.case, runs.results),
        "interleaving": runs.summary(),
        "plot": f"{NAME}.png",
    }
    _plot(runs.results, args.limit, args.out / f"{NAME}.png")
    _common.write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
