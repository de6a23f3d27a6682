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

Each side's run (idle CPU, then its wake-ups, on topics of its own) is a fresh process, so the
process CPU time is that consumer's alone; the sides take turns for ``--rounds`` rounds
(priority first in even rounds, raw first in odd ones). ``idle`` has each side's median and
per-round CPU, ``idle_cpu_ratio`` the median over the rounds of priority / raw CPU of the same
round (``idle_cpu_per_round``: every round's ratio, min, max); the wake-up latencies pool every
round's samples (``wakeup``, the targets and ``wakeup_cdf.png``), while ``wakeup_p99_ratio``
is the median of the per-round p99 ratios (``wakeup_p99_per_round``). The load average before
every run is under ``interleaving``.

    .venv/bin/python -m benchmarks.idle_wakeup [--smoke] [--idle-seconds S] [--samples N]
        [--rounds R]
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

from kafka import KafkaProducer

from benchmarks._common import (
    broker,
    create_topics,
    interleave_sides,
    parse_args,
    unique,
    write_result,
)
from benchmarks._consumers import (
    MAX_PRIORITY,
    Pacer,
    low_latency_producer,
    priority_consumer,
    raw_consumer,
    stamp_of,
    wait_assigned,
)
from benchmarks._idle import SIDES, add_arguments, idle_summary, side_result
from priority_kafka import create_priority_topics, priority_topic

NAME = "idle_wakeup"
_POLL_TIMEOUT_MS = 1000
_SETTLE_S = 1.0


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


def run_side(bootstrap_servers: str, side: str, idle_s: float, samples: int) -> dict[str, Any]:
    """Contender: one side's idle CPU, then its wake-up latencies, on topics of its own.

    ``side`` "raw": one KafkaConsumer on one topic; "priority": PriorityConsumer over
    ``MAX_PRIORITY`` levels, wake-ups measured on its highest and then its lowest level.
    """
    if side == "raw":
        topic = unique("idle-raw")
        create_topics(bootstrap_servers, [topic])
        consumer = raw_consumer(bootstrap_servers, [topic], enable_auto_commit=True)
        partitions, targets = 1, {"raw": (topic, 1)}
    else:
        topic = unique("idle")
        create_priority_topics(bootstrap_servers, topic, MAX_PRIORITY)
        consumer = priority_consumer(bootstrap_servers, topic, enable_auto_commit=True)
        partitions = MAX_PRIORITY
        targets = {
            "priority_highest": (priority_topic(topic, MAX_PRIORITY - 1), MAX_PRIORITY - 1),
            "priority_lowest": (priority_topic(topic, 0), 0),
        }
    latencies: dict[str, list[float]] = {}
    try:
        _settle(consumer, partitions)
        idle = _idle_cpu_percent(consumer, idle_s)
        producer = low_latency_producer(bootstrap_servers)
        try:
            for name, (target, seed) in targets.items():
                latencies[name] = _wakeups(consumer, producer, target, samples, seed=seed)
        finally:
            producer.close()
    finally:
        consumer.close()
    return side_result(idle, latencies)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, add_arguments)
    idle_s = 1.5 if args.smoke else args.idle_seconds
    samples = 10 if args.smoke else args.samples
    rounds = 1 if args.smoke else args.rounds
    with broker(args) as servers:
        runs = interleave_sides(
            run_side, SIDES, rounds,
            bootstrap_servers=servers, idle_s=idle_s, samples=samples,
        )
    result = {
        "idle_seconds": idle_s,
        "poll_timeout_ms": _POLL_TIMEOUT_MS,
        "samples": samples,
        "rounds": rounds,
        "smoke": args.smoke,
        **idle_summary(
            runs, args.out / "wakeup_cdf.png",
            {
                "priority_highest": "PriorityConsumer, highest level",
                "priority_lowest": "PriorityConsumer, lowest level",
                "raw": "raw KafkaConsumer",
            },
            f"Wake-up latency: send() to poll(timeout_ms=1000) return ({rounds} rounds)",
        ),
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
