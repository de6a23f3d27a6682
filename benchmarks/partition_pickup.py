"""Partition pickup: how soon a partition added to a level under traffic is handled, per level.

The scenario of ``tests/test_rebalancing.py`` (``benchmarks.scenarios.added_partition_pickup``):
a 3-level priority topic with 2 partitions per level, 20 records/s to every partition, one
``ShardedExecutor`` over a ``PriorityConsumer`` with ``metadata_max_age_ms=2000``. Each
repetition is a fresh topic and group; one partition is added to level 0, then 1, then 2 (the
order rotates with the repetition), each once the previous one was handled. ``pickup_s`` is the
time from ``create_partitions`` returning to the new partition's first record handled; the
bound the tests hold it to is ``metadata_max_age_ms`` + 5 s. Reported per level: min, median,
max over ``--repeats``; also the longest time any old partition went without a record handled.

    .venv/bin/python -m benchmarks.partition_pickup [--smoke] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks._common import broker, parse_args, unique, write_result
from benchmarks.scenarios import LEVELS, PICKUP_METADATA_MAX_AGE_MS, added_partition_pickup

NAME = "partition_pickup"


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=20, help="repetitions per level")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    if args.smoke:
        args.repeats = 1
    pickups: dict[int, list[float]] = {level: [] for level in range(LEVELS)}
    gaps: list[float] = []
    loads = []
    with broker(args) as servers:
        for repeat in range(args.repeats):
            loads.append([round(x, 2) for x in os.getloadavg()])
            order = [(level + repeat) % LEVELS for level in range(LEVELS)]
            run = added_partition_pickup(servers, unique("pickup"), unique("pickup-g"), order)
            for level, seconds in run["pickup_s"].items():
                pickups[level].append(seconds)
            gaps.append(max(run["longest_gap_s"].values()))
            print(f"repeat {repeat + 1}/{args.repeats}: "
                  + ", ".join(f"level {lv} {s:.2f} s" for lv, s in sorted(run["pickup_s"].items())),
                  flush=True)
    per_level = {
        level: {"min_s": min(v), "median_s": statistics.median(v), "max_s": max(v)}
        for level, v in pickups.items()
    }
    for level, figures in per_level.items():
        print(f"level {level}: min {figures['min_s']:.2f} s, median {figures['median_s']:.2f} s, "
              f"max {figures['max_s']:.2f} s")
    result = {
        "smoke": args.smoke,
        "levels": LEVELS,
        "metadata_max_age_ms": PICKUP_METADATA_MAX_AGE_MS,
        "bound_s": PICKUP_METADATA_MAX_AGE_MS / 1000 + 5,
        "repeats": args.repeats,
        "pickup_per_level": per_level,
        "pickup_s": pickups,
        "longest_gap_of_old_partitions_s": {"max": max(gaps), "per_repeat": gaps},
        "load_average_before_repeat": loads,
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
