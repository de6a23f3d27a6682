"""Budgets against a real rate-limited downstream: urgent latency, seconds over budget, shares.

The downstream is a local HTTP server on loopback, started by each run in its own process,
answering 429 (with ``Retry-After``) past ``--limit`` requests/s (a token bucket holding
``--limit / 20`` requests, so a client spending more than the rate is refused within 50 ms).
A level-0 flood of ``--flood`` records (100 keys) waits on ``<topic>-0``; once the executor
runs, level-2 records are produced at ``--urgent-rate``/s, stamped; the handler makes one HTTP
request per record.

Two sides, each run in a fresh process, taking turns for ``--rounds`` rounds (budgets first in
even rounds): ``budgets`` (``Budgets({"downstream": limit})``; a 429 raises ``Throttled``) and
``none`` (the same executor; a 429 raises an error the retry policy backs off from: 429s and
backoffs decide). Per side: the level-2 latency (stamp to accepted call; p50/p99), the accepted
calls per 1 s window at the server and how many windows were above 1.05 × the limit, the 429s,
and each level's share of the accepted calls while both levels wait. ``p99_ratio`` is the
per-round none / budgets p99; the load average before every run is under ``interleaving``.

    .venv/bin/python -m benchmarks.budget_priority [--smoke] [--flood N] [--limit R]
        [--urgent-rate R] [--seconds S] [--rounds R]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import threading
import time
from collections import Counter
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks import _common
from benchmarks._consumers import Pacer, is_stamped, latency_summary, low_latency_producer, stamp_of
from benchmarks._executor import executor_consumer
from benchmarks._running import Running
from priority_kafka import Budget, Budgets, Throttled, create_priority_topics, priority_topic
from priority_kafka.executor import ShardedExecutor

NAME = "budget_priority"
SIDES = ("budgets", "none")
SHARDS = 8
KEYS = 100


def _serve(limit: float, port_out: Any, stop: Any) -> None:
    """The downstream (its own process): 200 while its token bucket has a token, else 429."""
    lock = threading.Lock()
    capacity = max(1.0, limit / 20)
    state = {"tokens": capacity, "at": time.monotonic()}
    accepted: list[float] = []
    refused = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if self.path == "/stats":
                with lock:
                    body = json.dumps([accepted, refused[0]]).encode()
                self._answer(200, body)
                return
            now = time.monotonic()
            with lock:
                state["tokens"] = min(capacity, state["tokens"] + (now - state["at"]) * limit)
                state["at"] = now
                ok = state["tokens"] >= 1
                if ok:
                    state["tokens"] -= 1
                    accepted.append(now)
                else:
                    refused[0] += 1
            self._answer(200 if ok else 429, b"ok" if ok else b"slow down",
                         None if ok else f"{1 / limit:.3f}")

        def _answer(self, status: int, body: bytes, retry_after: str | None = None) -> None:
            self.send_response(status)
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_out.send(server.server_address[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop.wait()
    server.shutdown()


class Refused(Exception):
    """A 429 without budgets: the retry policy backs off."""


def run_side(bootstrap_servers: str, side: str, flood: int, limit: float, urgent_rate: float,
             seconds: float) -> dict[str, Any]:
    """Contender: fresh topics, the downstream, ``seconds`` of the flood plus urgent records."""
    topic = _common.unique("budget")
    create_priority_topics(bootstrap_servers, topic, 3)
    _common.preload(bootstrap_servers, priority_topic(topic, 0), flood, key_count=KEYS)
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    stop = context.Event()
    server = context.Process(target=_serve, args=(limit, send, stop), daemon=True)
    server.start()
    port = receive.recv()
    local = threading.local()
    lock = threading.Lock()
    latencies: list[float] = []
    levels: list[tuple[float, int]] = []
    started = threading.Event()

    def handler(record: Any) -> Any:
        started.set()
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection("127.0.0.1", port)
        connection.request("GET", "/call")
        answer = connection.getresponse()
        answer.read()
        if answer.status == 429:
            retry_after = float(answer.getheader("Retry-After") or 0)
            if side == "budgets":
                raise Throttled(retry_after=retry_after)
            raise Refused(retry_after)
        now = time.perf_counter()
        with lock:
            urgent = is_stamped(record.value)
            levels.append((time.monotonic(), 2 if urgent else 0))
            if urgent:
                latencies.append(now - stamp_of(record.value))
        return None

    consumer = executor_consumer("kafka-python", bootstrap_servers, [topic], levels=True)
    budgets = Budgets({"downstream": Budget(limit)}) if side == "budgets" else None
    executor = ShardedExecutor(consumer, handler, shards=SHARDS, budgets=budgets,
                               max_attempts=1_000_000, retry_backoff_ms=50,
                               retry_backoff_max_ms=1000, max_in_flight_per_partition=2000)
    pacer = Pacer(low_latency_producer(bootstrap_servers), priority_topic(topic, 2),
                  lambda: 1 / urgent_rate)
    try:
        with Running(executor) as running:
            if not running.wait(started, 60):
                raise TimeoutError("no record within 60 s")
            start = time.monotonic()
            pacer.start()
            time.sleep(seconds)  # the measured span
            pacer.finish()
            end = time.monotonic()
        stats = executor.budget_stats()
    finally:
        connection = http.client.HTTPConnection("127.0.0.1", port)
        connection.request("GET", "/stats")
        accepted, refused = json.loads(connection.getresponse().read())
        stop.set()
        server.join(10)
    windows = Counter(int(t - start) for t in accepted if start <= t < end)
    per_second = [windows.get(i, 0) for i in range(int(end - start))]
    during = Counter(level for t, level in levels if start <= t < end)
    total = sum(during.values()) or 1
    return {
        "latency_2": latency_summary(latencies),
        "accepted_per_s": per_second,
        "seconds_over": sum(1 for n in per_second if n > 1.05 * limit),
        "refused_429": refused,
        "shares": {str(level): during[level] / total for level in (2, 0)},
        "budget_wait_s": {name: {str(lv): round(s.wait_s, 3) for lv, s in by_level.items()}
                          for name, by_level in stats.items()},
    }


#: The benchmark's own options: flag, type, default, help.
_OPTIONS = (
    ("--flood", int, 50_000, "level-0 records"),
    ("--limit", float, 200.0, "downstream requests/s"),
    ("--urgent-rate", float, 20.0, "level-2 records/s"),
    ("--seconds", float, 30.0, "measured span per run"),
    ("--rounds", int, 3, "runs per side"),
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, kind, default, text in _OPTIONS:
        parser.add_argument(flag, type=kind, default=default, help=text)


def _plot(results: dict[str, list[dict[str, Any]]], limit: float, path: Path) -> None:
    """Accepted calls per second at the downstream, every run of each side, and the limit."""
    fig, ax = _common.new_figure(figsize=(8, 4))
    for side, style in zip(SIDES, ("-", "--"), strict=True):
        for index, run in enumerate(results[side]):
            ax.plot(run["accepted_per_s"], style, label=f"{side} round {index + 1}")
    ax.axhline(limit * 1.05, color="grey", linewidth=0.8, label="1.05 x limit")
    ax.set_xlabel("second of the measured span")
    ax.set_ylabel("accepted calls / s")
    ax.legend(fontsize="small")
    _common.save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = _common.parse_args(__doc__ or NAME, argv, _add_arguments)
    if args.smoke:
        args.flood, args.seconds, args.rounds = 2000, 4.0, 1
    with _common.broker(args) as servers:
        runs = _common.interleave_sides(run_side, SIDES, args.rounds, bootstrap_servers=servers,
                                flood=args.flood, limit=args.limit,
                                urgent_rate=args.urgent_rate, seconds=args.seconds)
    p99 = {side: [r["latency_2"]["p99_ms"] for r in runs.results[side]] for side in SIDES}
    result = {
        "smoke": args.smoke,
        "settings": {"flood": args.flood, "limit": args.limit, "urgent_rate": args.urgent_rate,
                     "seconds": args.seconds, "shards": SHARDS},
        "per_round": runs.results,
        "p99_ms": p99,
        "p99_ratio_none_over_budgets": [n / b for n, b in zip(p99["none"], p99["budgets"],
                                                                strict=True)],
        "seconds_over": {side: [r["seconds_over"] for r in runs.results[side]] for side in SIDES},
        "interleaving": runs.summary(),
        "plot": f"{NAME}.png",
    }
    _plot(runs.results, args.limit, args.out / f"{NAME}.png")
    _common.write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
