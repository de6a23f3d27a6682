"""A CPU-bound handler under the GIL: what threads give, and what a process pool gives instead.

The handler burns ``--work-ms`` of pure-Python CPU per record (a calibrated loop that holds the
GIL). One partition of keyed records (1000 keys) is handled by: a plain kafka-python loop (the
baseline, measured in the same run); ShardedExecutor with 1, 4 and 16 worker threads running
the work directly; and ShardedExecutor with an ``async def`` handler that awaits the work in a
``ProcessPoolExecutor`` (one process per CPU), keeping per-key order and commit safety (a
record is done when its future is). The work per record is calibrated once, in the parent.

Every run (the plain loop and each executor set-up) is a fresh process; each round runs all of
them, in the order plain loop, 1, 4, 16 threads, process pool in even rounds and the reverse in
odd ones, for ``--rounds`` rounds. Reported per set-up: records/s per round and its median,
and the speed-up over the plain loop per round (that round's rate / that round's plain-loop
rate), its median (``speedup_vs_plain_loop``), min and max; the CPU count, the load average
before every run (under ``interleaving``) and after the last (CPUs busy with other work cannot
be won back); ``executor_cpu.png`` (medians).

    .venv/bin/python -m benchmarks.executor_cpu [--smoke] [--records N] [--work-ms MS] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from benchmarks._common import (
    Contender,
    broker,
    create_topics,
    interleave,
    new_figure,
    parse_args,
    preload,
    ratio_summary,
    save_figure,
    unique,
    write_result,
)
from benchmarks._consumers import raw_consumer
from benchmarks._executor import Meter, plain_loop_rate, run_executor
from priority_kafka.executor import ShardedExecutor

NAME = "executor_cpu"
KEYS = 1000


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=1000, help="records per run")
    parser.add_argument("--work-ms", type=float, default=10.0, help="CPU per record (ms)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per set-up")


def burn(iterations: int) -> int:
    """Pure-Python arithmetic holding the GIL for ``iterations`` steps."""
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


def calibrate(work_s: float) -> int:
    """Iterations of :func:`burn` that take about ``work_s`` seconds on this machine."""
    iterations = 10_000
    while True:
        start = time.process_time()
        burn(iterations)
        spent = time.process_time() - start
        if spent > 0.05:
            return max(1, int(iterations * work_s / spent))
        iterations *= 4


def plain_loop(bootstrap_servers: str, topic: str, records: int, iterations: int) -> dict[str, Any]:
    """Contender: the plain poll-then-handle loop's records/s."""
    return {
        "records_per_s": plain_loop_rate(
            bootstrap_servers, topic, records, lambda _: burn(iterations)
        )
    }


def threads(
    bootstrap_servers: str, topic: str, records: int, iterations: int, shards: int
) -> dict[str, Any]:
    """Contender: ShardedExecutor whose ``shards`` worker threads run the work directly."""
    meter = Meter(records)
    executor = ShardedExecutor(
        raw_consumer(bootstrap_servers, [topic]), meter.wrap(lambda _: burn(iterations)),
        shards=shards,
    )
    times = run_executor(executor, meter, 120 + records / 50)
    return {**times, "records_per_s": records / times["processing_s"]}


def process_pool(
    bootstrap_servers: str, topic: str, records: int, iterations: int
) -> dict[str, Any]:
    """Contender: an ``async def`` handler awaiting the work in a process pool, one per CPU."""
    cpus = os.cpu_count() or 1
    # spawn, not fork: this process runs kafka-python's IO threads.
    pool = ProcessPoolExecutor(cpus, mp_context=multiprocessing.get_context("spawn"))
    try:
        list(pool.map(burn, [1] * cpus))  # start the processes before measuring

        async def offload(record: Any) -> None:
            await asyncio.get_running_loop().run_in_executor(pool, burn, iterations)

        meter = Meter(records)
        executor = ShardedExecutor(
            raw_consumer(bootstrap_servers, [topic]), meter.wrap_async(offload),
            shards=4 * cpus, async_concurrency=2 * cpus,
        )
        times = run_executor(executor, meter, 120 + records / 50)
    finally:
        pool.shutdown()
    return {**times, "records_per_s": records / times["processing_s"]}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    records = 60 if args.smoke else args.records
    rounds = 1 if args.smoke else args.rounds
    iterations = calibrate(args.work_ms / 1000)
    cpus = os.cpu_count() or 1
    topic = unique("cpu")
    with broker(args) as servers:
        create_topics(servers, [topic])
        preload(servers, topic, records, key_count=KEYS)
        common = {
            "bootstrap_servers": servers, "topic": topic, "records": records,
            "iterations": iterations,
        }
        interleaved = interleave(
            [
                Contender("plain_loop", plain_loop, common),
                *(Contender(f"threads-{n}", threads, {**common, "shards": n}) for n in (1, 4, 16)),
                Contender(f"process-pool-{cpus}", process_pool, common),
            ],
            rounds,
        )
    baseline_per_round = interleaved.values("plain_loop", "records_per_s")
    baseline = statistics.median(baseline_per_round)
    runs: dict[str, dict[str, Any]] = {}
    for name in interleaved.results:
        if name == "plain_loop":
            continue
        rates = interleaved.values(name, "records_per_s")
        speedup = ratio_summary(rates, baseline_per_round)
        runs[name] = {
            "wall_s": statistics.median(interleaved.values(name, "wall_s")),
            "processing_s": statistics.median(interleaved.values(name, "processing_s")),
            "records_per_s": statistics.median(rates),
            "records_per_s_per_round": rates,
            "speedup_vs_plain_loop": speedup["ratio"],
            "speedup_per_round": speedup["ratio_per_round"],
            "speedup_min": speedup["ratio_min"],
            "speedup_max": speedup["ratio_max"],
        }
        print(f"{name}: {runs[name]['records_per_s']:.0f}/s, x{speedup['ratio']:.2f} "
              f"(rounds {speedup['ratio_per_round']})")
    fig, ax = new_figure(figsize=(7, 4.5))
    names = ["plain loop", *runs]
    ax.bar(names, [baseline, *(r["records_per_s"] for r in runs.values())])
    ax.set_ylabel("records / s")
    ax.set_title(f"{args.work_ms:g} ms of pure-Python CPU per record, {cpus} CPUs")
    save_figure(fig, args.out / f"{NAME}.png")
    result = {
        "smoke": args.smoke,
        "records": records,
        "work_ms": args.work_ms,
        "cpus": cpus,
        # Other processes compete for the same CPUs: what a process pool can win depends on it.
        "load_average_1m_after": os.getloadavg()[0],
        "rounds": rounds,
        "plain_loop_per_s": baseline,
        "plain_loop_per_s_per_round": baseline_per_round,
        "runs": runs,
        "interleaving": interleaved.summary(),
        "plot": f"{NAME}.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
