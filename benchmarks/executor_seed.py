"""Seed scenario: one partition, a 10 ms I/O-like handler, ShardedExecutor with 1-64 shards.

A single-partition topic holds keyed records (10,000 distinct keys, 100 B). The handler sleeps
10 ms (a remote call). A plain kafka-python loop (poll, then handle each record in turn) is
the baseline measured in the same run; the ideal for N shards is N / 10 ms = N x 100 records/s.
Each executor run reads ``shards x 100 x --seconds`` records in ``"key"`` order with its own
consumer group. Reported: throughput (records / processing second), its ratio to the ideal
(target >= 0.9 at 32 shards) and the speed-up over the plain loop; ``executor_seed.png``.

    .venv/bin/python -m benchmarks.executor_seed [--smoke] [--seconds S]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
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

NAME = "executor_seed"
HANDLER_S = 0.010
KEYS = 10_000


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=6.0, help="ideal seconds per run")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    seconds = 0.5 if args.smoke else args.seconds
    shard_counts = [1, 8] if args.smoke else [1, 8, 32, 64]
    counts = {shards: int(shards * seconds / HANDLER_S) for shards in shard_counts}
    topic = unique("seed")
    runs: dict[str, dict[str, float]] = {}
    with broker(args) as servers:
        create_topics(servers, [topic])
        preload(servers, topic, max(counts.values()), key_count=KEYS)
        baseline = plain_loop_rate(
            servers, topic, max(20, int(seconds / HANDLER_S)), lambda _: time.sleep(HANDLER_S)
        )
        for shards, count in counts.items():
            meter = Meter(count)
            executor = ShardedExecutor(
                raw_consumer(servers, [topic]), meter.wrap(lambda _: time.sleep(HANDLER_S)),
                shards=shards, ordering="key", max_in_flight_per_partition=max(200, 4 * shards),
            )
            times = run_executor(executor, meter, timeout_s=60 + 3 * count * HANDLER_S / shards)
            rate = count / times["processing_s"]
            ideal = shards / HANDLER_S
            runs[str(shards)] = {
                "records": count,
                **times,
                "records_per_s": rate,
                "ideal_per_s": ideal,
                "ratio_to_ideal": rate / ideal,
                "speedup_vs_plain_loop": rate / baseline,
            }
            print(f"shards={shards}: {rate:.0f}/s = {rate / ideal:.2f} of ideal {ideal:.0f}/s")
    fig, ax = new_figure(figsize=(6.5, 4.5))
    xs = [int(s) for s in runs]
    ax.plot(xs, [r["ideal_per_s"] for r in runs.values()], "k--", label="ideal: shards / 10 ms")
    ax.plot(xs, [r["records_per_s"] for r in runs.values()], "o-", label="ShardedExecutor")
    ax.axhline(baseline, color="gray", linestyle=":", label=f"plain loop ({baseline:.0f}/s)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("shards (worker threads)")
    ax.set_ylabel("records / s")
    ax.set_title("One partition, 10 ms handler")
    ax.legend()
    save_figure(fig, args.out / f"{NAME}.png")
    result = {
        "smoke": args.smoke,
        "handler_ms": HANDLER_S * 1000,
        "keys": KEYS,
        "plain_loop_per_s": baseline,
        "runs": runs,
        "target_ratio_to_ideal_at_32": 0.9,
        "plot": f"{NAME}.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
