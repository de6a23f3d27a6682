"""Idle CPU of a poll(1.0) loop and wake-up latency: confluent PriorityConsumer vs raw Consumer.

Idle CPU: once its group(s) joined (and a settling second), a consumer subscribed to empty
topics runs ``while ...: consumer.poll(1.0)`` for ``--idle-seconds`` (10 s); reported as
process CPU time (every thread, librdkafka's included) over wall time, in % of one core.
PriorityConsumer (3 levels, one librdkafka consumer each) vs one raw ``Consumer`` on one topic;
target < 2 %.

Wake-up latency: the same consumers keep waiting in ``poll(1.0)`` while a producer thread
(``linger.ms`` 0) sends one record every 50-150 ms (uniformly random) carrying its send time;
latency is that ``produce()`` call to the return of the ``poll()`` that delivered it. Measured
for PriorityConsumer's highest level (target p99 < 50 ms), its lowest level (checked every
50 ms while it waits on the highest) and the raw consumer.

Each side's run (idle CPU, then its wake-ups, on topics of its own) is a fresh process, so the
process CPU time is that consumer's alone; the sides take turns for ``--rounds`` rounds, and
the result has the same shape as ``benchmarks.idle_wakeup``'s (per-round values and ratios,
latencies pooled over the rounds, ``confluent_wakeup_cdf.png``, load averages).

    .venv/bin/python -m benchmarks.confluent_idle [--smoke] [--idle-seconds S] [--samples N]
        [--rounds R]
"""

from __future__ import annotations

import random
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._common import (
    broker,
    create_topics,
    interleave_sides,
    parse_args,
    unique,
    write_result,
)
from benchmarks._idle import SIDES, add_arguments, idle_summary, side_result

NAME = "confluent_idle"
MAX_PRIORITY = 3
_SETTLE_S = 1.0


def _settle(consumer: Any, partitions: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(consumer.assignment()) < partitions:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{consumer.assignment()} assigned after {timeout_s} s")
        consumer.poll(0.1)
    settled = time.monotonic() + _SETTLE_S
    while time.monotonic() < settled:
        consumer.poll(0.1)


def _idle_cpu(consumer: Any, seconds: float) -> dict[str, float]:
    polls = 0
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - start_wall < seconds:
        if consumer.poll(1.0) is not None:
            raise AssertionError("an idle consumer returned a message")
        polls += 1
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    return {"cpu_percent": 100 * cpu / wall, "cpu_seconds": cpu, "wall_seconds": wall,
            "polls": polls}


def _wakeups(consumer: Any, servers: str, topic: str, samples: int, seed: int) -> list[float]:
    """Latencies (s) of ``samples`` records sent to ``topic`` while ``consumer`` polls."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0, "acks": 1})
    rng = random.Random(seed)
    stop = threading.Event()

    def send() -> None:
        for _ in range(samples):
            if stop.wait(rng.uniform(0.05, 0.15)):
                return
            producer.produce(topic, struct.pack(">d", time.perf_counter()))
            producer.poll(0)
        producer.flush()

    sender = threading.Thread(target=send)
    latencies: list[float] = []
    deadline = time.monotonic() + 60 + samples * 0.5
    sender.start()
    try:
        while len(latencies) < samples:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(latencies)} of {samples} wake-ups arrived")
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                latencies.append(time.perf_counter() - struct.unpack(">d", message.value())[0])
    finally:
        stop.set()
        sender.join()
    return latencies


def run_side(servers: str, side: str, idle_s: float, samples: int) -> dict[str, Any]:
    """Contender: one side's idle CPU, then its wake-up latencies, on topics of its own.

    ``side`` "raw": one ``Consumer`` on one topic; "priority": PriorityConsumer over
    ``MAX_PRIORITY`` levels, wake-ups measured on its highest and then its lowest level.
    """
    from confluent_kafka import Consumer

    from priority_kafka import create_priority_topics
    from priority_kafka.confluent import PriorityConsumer

    common = {"bootstrap.servers": servers, "auto.offset.reset": "latest",
              "group.id": unique(side)}
    consumer: Any
    if side == "raw":
        topic = unique("cfl-idle-raw")
        create_topics(servers, [topic])
        consumer, partitions, targets = Consumer(common), 1, {"raw": (topic, 1)}
    else:
        topic = unique("cfl-idle")
        create_priority_topics(servers, topic, MAX_PRIORITY)
        consumer = PriorityConsumer({**common, "max.priority": MAX_PRIORITY})
        partitions = MAX_PRIORITY
        targets = {"priority_highest": (f"{topic}-{MAX_PRIORITY - 1}", MAX_PRIORITY - 1),
                   "priority_lowest": (f"{topic}-0", 0)}
    try:
        consumer.subscribe([topic])
        _settle(consumer, partitions)
        idle = _idle_cpu(consumer, idle_s)
        latencies = {
            name: _wakeups(consumer, servers, target, samples, seed)
            for name, (target, seed) in targets.items()
        }
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
            run_side, SIDES, rounds, servers=servers, idle_s=idle_s, samples=samples
        )
    result = {
        "idle_seconds": idle_s,
        "poll_timeout_s": 1.0,
        "samples": samples,
        "rounds": rounds,
        "smoke": args.smoke,
        **idle_summary(
            runs, args.out / "confluent_wakeup_cdf.png",
            {
                "priority_highest": "confluent PriorityConsumer, highest level",
                "priority_lowest": "confluent PriorityConsumer, lowest level",
                "raw": "raw confluent Consumer",
            },
            f"Wake-up latency: produce() to poll(1.0) return ({rounds} rounds)",
        ),
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
