"""A CPU-bound handler under the GIL: what threads give, and what a process pool gives instead.

The handler burns ``--work-ms`` of pure-Python CPU per record (a calibrated loop that holds the
GIL). One partition of keyed records (1000 keys) is handled by: a plain kafka-python loop (the
baseline, measured in the same run); ShardedExecutor with 1, 4 and 16 worker threads running
the work directly; and ShardedExecutor with an ``async def`` handler that awaits the work in a
``ProcessPoolExecutor`` (one process per CPU), keeping per-key order and commit safety (a
record is done when its future is). Reported: records/s, speed-up over the plain loop, the CPU
count and the load average after the run (CPUs busy with other work cannot be won back);
``executor_cpu.png``.

    .venv/bin/python -m benchmarks.executor_cpu [--smoke] [--records N] [--work-ms MS]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from benchmarks._common import (
    broker,
    create_topics,
    new_figure,
    parse_args,
    preload,
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


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    records = 60 if args.smoke else args.records
    iterations = calibrate(args.work_ms / 1000)
    cpus = os.cpu_count() or 1
    topic = unique("cpu")
    runs: dict[str, dict[str, float]] = {}
    # spawn, not fork: the parent runs kafka-python's IO threads.
    pool = ProcessPoolExecutor(cpus, mp_context=multiprocessing.get_context("spawn"))
    try:
        list(pool.map(burn, [1] * cpus))  # start the processes before measuring
        with broker(args) as servers:
            create_topics(servers, [topic])
            preload(servers, topic, records, key_count=KEYS)
            baseline = plain_loop_rate(servers, topic, records, lambda _: burn(iterations))
            for threads in (1, 4, 16):
                meter = Meter(records)
                executor = ShardedExecutor(
                    raw_consumer(servers, [topic]), meter.wrap(lambda _: burn(iterations)),
                    shards=threads,
                )
                runs[f"threads-{threads}"] = run_executor(executor, meter, 120 + records / 50)

            async def offload(record: Any) -> None:
                await asyncio.get_running_loop().run_in_executor(pool, burn, iterations)

            meter = Meter(records)
            executor = ShardedExecutor(
                raw_consumer(servers, [topic]), meter.wrap_async(offload), shards=4 * cpus,
                async_concurrency=2 * cpus,
            )
            runs[f"process-pool-{cpus}"] = run_executor(executor, meter, 120 + records / 50)
    finally:
        pool.shutdown()
    for name, times in runs.items():
        times["records_per_s"] = records / times["processing_s"]
        times["speedup_vs_plain_loop"] = times["records_per_s"] / baseline
        print(f"{name}: {times['records_per_s']:.0f}/s, x{times['speedup_vs_plain_loop']:.2f}")
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
        "plain_loop_per_s": baseline,
        "runs": runs,
        "plot": f"{NAME}.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
