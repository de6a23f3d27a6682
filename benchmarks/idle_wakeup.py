"""Idle CPU of a poll(timeout_ms=1000) loop, and wake-up latency: PriorityConsumer vs raw consumer.

Idle CPU: once its group(s) joined (and a settling second), a consumer subscribed to empty
topics runs ``while ...: consumer.poll(timeout_ms=1000)`` for ``--idle-seconds`` (10 s);
reported as process CPU time (``time.process_time()``, every thread: the poll loop, the client
I/O threads, heartbeats) over wall time, in % of one core. PriorityConsumer (3 levels, one
KafkaConsumer each) vs one raw ``KafkaConsumer`` on one topic; target < 2% for PriorityConsumer.

Wake-up latency: the same consumers keep waiting in ``poll(timeout_ms=1000)`` while a producer
thread (no linger) sends one record every 50-150 ms (uniformly random, so arrivals fall at
any point of the consumer's wait) carrying its send time; latency is that send() call to the
return of the poll that delivered it. Measured for PriorityConsumer's highest level (target
p99 < 50 ms), its lowest level (checked every 100-400 ms while it waits on the highest, so expect
up to a slice more), and the raw consumer; ratios are against the raw consumer.

    .venv/bin/python -m benchmarks.idle_wakeup [--smoke] [--idle-seconds S] [--samples N]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from typing import Any

from kafka import KafkaProducer

from benchmarks._common import (
    broker,
    create_topics,
    parse_args,
    unique,
    write_result,
)
from benchmarks._consumers import (
    MAX_PRIORITY,
    Pacer,
    latency_summary,
    low_latency_producer,
    plot_cdfs,
    priority_consumer,
    raw_consumer,
    stamp_of,
    wait_assigned,
)
from priority_kafka import create_priority_topics, priority_topic

NAME = "idle_wakeup"
_POLL_TIMEOUT_MS = 1000
_SETTLE_S = 1.0


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--samples", type=int, default=200, help="wake-ups per measured topic")


def _settle(consumer: Any, partitions: int, timeout_s: float = 30.0) -> None:
    """Poll until ``partitions`` partitions are assigned, then a little longer."""
    wait_assigned(consumer, partitions, timeout_s)
    settled = time.monotonic() + _SETTLE_S
    while time.monotonic() < settled:
        consumer.poll(timeout_ms=100)


def _idle_cpu_percent(consumer: Any, seconds: float) -> dict[str, float]:
    """CPU of the process while ``consumer`` idles in ``poll(timeout_ms=1000)``, % of a core."""
    polls = 0
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - start_wall < seconds:
        if consumer.poll(timeout_ms=_POLL_TIMEOUT_MS):
            raise AssertionError("an idle consumer returned records")
        polls += 1
    wall = time.perf_counter() - start_wall
    cpu = time.process_time() - start_cpu
    return {"cpu_percent": 100 * cpu / wall, "cpu_seconds": cpu, "wall_seconds": wall,
            "polls": polls}


def _wakeups(
    consumer: Any, producer: KafkaProducer, topic: str, samples: int, seed: int
) -> list[float]:
    """Latencies (s) of ``samples`` records sent to ``topic`` while ``consumer`` waits in poll."""
    rng = random.Random(seed)
    pacer = Pacer(producer, topic, lambda: rng.uniform(0.05, 0.15))
    latencies: list[float] = []
    deadline = time.monotonic() + 60 + samples * 0.5
    sent: int | None = None
    pacer.start()
    try:
        # After the last sample, the records still in flight are read too (and counted), so
        # none is left behind for the next measurement.
        while sent is None or len(latencies) < sent:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(latencies)} of {samples} wake-ups arrived")
            batch = consumer.poll(timeout_ms=_POLL_TIMEOUT_MS)
            returned = time.perf_counter()
            latencies.extend(returned - stamp_of(r.value) for rs in batch.values() for r in rs)
            if sent is None and len(latencies) >= samples:
                sent = pacer.finish()
    finally:
        pacer.finish_if_running()
    return latencies


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    idle_s = 1.5 if args.smoke else args.idle_seconds
    samples = 10 if args.smoke else args.samples
    topic, raw_topic = unique("idle"), unique("idle-raw")
    with broker(args) as servers:
        create_priority_topics(servers, topic, MAX_PRIORITY)
        create_topics(servers, [raw_topic])
        idle: dict[str, dict[str, float]] = {}
        latencies: dict[str, list[float]] = {}
        # Measured one after the other: the process CPU time must be one consumer's alone.
        raw = raw_consumer(servers, [raw_topic], enable_auto_commit=True)
        try:
            _settle(raw, 1)
            idle["raw"] = _idle_cpu_percent(raw, idle_s)
            producer = low_latency_producer(servers)
            try:
                latencies["raw"] = _wakeups(raw, producer, raw_topic, samples, seed=1)
            finally:
                producer.close()
        finally:
            raw.close()
        priority = priority_consumer(servers, topic, enable_auto_commit=True)
        try:
            _settle(priority, MAX_PRIORITY)
            idle["priority"] = _idle_cpu_percent(priority, idle_s)
            producer = low_latency_producer(servers)
            try:
                for name, level in (("priority_highest", MAX_PRIORITY - 1), ("priority_lowest", 0)):
                    latencies[name] = _wakeups(
                        priority, producer, priority_topic(topic, level), samples, seed=level
                    )
            finally:
                producer.close()
        finally:
            priority.close()
    summary = {name: latency_summary(values) for name, values in latencies.items()}
    labels = {
        "priority_highest": "PriorityConsumer, highest level",
        "priority_lowest": "PriorityConsumer, lowest level",
        "raw": "raw KafkaConsumer",
    }
    plot_cdfs(
        args.out / "wakeup_cdf.png",
        {label: latencies[name] for name, label in labels.items()},
        "Wake-up latency: send() to poll(timeout_ms=1000) return",
    )
    raw_p99 = summary["raw"]["p99_ms"]
    result = {
        "idle_seconds": idle_s,
        "poll_timeout_ms": _POLL_TIMEOUT_MS,
        "samples": samples,
        "smoke": args.smoke,
        "idle": idle,
        "idle_cpu_ratio": idle["priority"]["cpu_percent"] / idle["raw"]["cpu_percent"],
        "target_idle_cpu_percent": 2.0,
        "wakeup": summary,
        "wakeup_p99_ratio": {
            "highest_vs_raw": summary["priority_highest"]["p99_ms"] / raw_p99,
            "lowest_vs_raw": summary["priority_lowest"]["p99_ms"] / raw_p99,
        },
        "target_highest_p99_ms": 50.0,
        "plot": "wakeup_cdf.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
