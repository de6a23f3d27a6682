"""What the confluent-kafka benchmarks share: preloading, and interleaved rounds in fresh processes.

Each contender runs once per round in a fresh ``python -m benchmarks.<module> --child ...``
process (so neither inherits the other's warm caches, threads or memory), A B A B ..., and
prints one JSON line: ``{"records", "wall_s", "cpu_s"}`` (``cpu_s`` is the child's process CPU
time over the timed interval: every thread, librdkafka's included).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Producer


def preload(servers: str, topics: Sequence[str], per_topic: int, size: int = 100) -> None:
    """Produce ``per_topic`` records of ``size`` bytes to each topic with confluent's Producer."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20, "acks": 1})
    payload = b"x" * size
    for topic in topics:
        for _ in range(per_topic):
            while True:
                try:
                    producer.produce(topic, payload)
                    break
                except BufferError:
                    producer.poll(0.05)
    producer.flush()


def run_child(module: str, arguments: Sequence[str]) -> dict[str, float]:
    """Run one contender in a fresh process; return the JSON line it printed last."""
    root = str(Path(__file__).resolve().parents[1])  # this checkout's benchmarks and package
    path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
    done = subprocess.run(
        [sys.executable, "-m", module, "--child", *arguments],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PYTHONPATH": path},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} child {arguments} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def interleave(
    contenders: Sequence[str],
    rounds: int,
    run: Callable[[str, int], dict[str, float]],
    subject: str,
    baseline: str,
) -> dict[str, Any]:
    """Run every contender once per round, in order; summarise rates and per-round ratios.

    ``run(contender, round)`` returns a child's ``{"records", "wall_s", "cpu_s"}``.
    """
    per_round: list[dict[str, Any]] = []
    for index in range(rounds):
        row: dict[str, Any] = {"load_average_before": os.getloadavg()[0]}
        for name in contenders:
            child = run(name, index)
            row[name] = {
                **child,
                "records_per_s": child["records"] / child["wall_s"],
                "records_per_cpu_s": child["records"] / child["cpu_s"],
            }
        row["ratio"] = row[subject]["records_per_s"] / row[baseline]["records_per_s"]
        row["ratio_per_cpu_s"] = (
            row[subject]["records_per_cpu_s"] / row[baseline]["records_per_cpu_s"]
        )
        row["load_average_after"] = os.getloadavg()[0]
        per_round.append(row)
        print(
            f"round {index}: {subject}/{baseline} {row['ratio']:.3f} per CPU-s "
            f"{row['ratio_per_cpu_s']:.3f} (load {row['load_average_before']:.2f})",
            flush=True,
        )

    def median(name: str, key: str) -> float:
        return statistics.median(row[name][key] for row in per_round)

    return {
        "rounds": per_round,
        "median_records_per_s": {name: median(name, "records_per_s") for name in contenders},
        "median_records_per_cpu_s": {
            name: median(name, "records_per_cpu_s") for name in contenders
        },
        "ratios": [row["ratio"] for row in per_round],
        "ratios_per_cpu_s": [row["ratio_per_cpu_s"] for row in per_round],
        "median_ratio": statistics.median(row["ratio"] for row in per_round),
        "median_ratio_per_cpu_s": statistics.median(row["ratio_per_cpu_s"] for row in per_round),
        "load_average": [row["load_average_before"] for row in per_round],
    }
