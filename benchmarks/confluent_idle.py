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

    .venv/bin/python -m benchmarks.confluent_idle [--smoke] [--idle-seconds S] [--samples N]
"""

from __future__ import annotations

import argparse
import random
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._common import broker, create_topics, parse_args, unique, write_result
from benchmarks._consumers import latency_summary

NAME = "confluent_idle"
MAX_PRIORITY = 3
_SETTLE_S = 1.0


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--samples", type=int, default=200, help="wake-ups per measured topic")


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


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    from confluent_kafka import Consumer

    from priority_kafka import create_priority_topics
    from priority_kafka.confluent import PriorityConsumer

    idle_s = 1.5 if args.smoke else args.idle_seconds
    samples = 10 if args.smoke else args.samples
    topic, raw_topic = unique("cfl-idle"), unique("cfl-idle-raw")
    idle: dict[str, dict[str, float]] = {}
    latencies: dict[str, list[float]] = {}
    with broker(args) as servers:
        create_priority_topics(servers, topic, MAX_PRIORITY)
        create_topics(servers, [raw_topic])
        common = {"bootstrap.servers": servers, "auto.offset.reset": "latest"}
        # One after the other: the process CPU time must be one consumer's alone.
        raw = Consumer({**common, "group.id": unique("raw")})
        try:
            raw.subscribe([raw_topic])
            _settle(raw, 1)
            idle["raw"] = _idle_cpu(raw, idle_s)
            latencies["raw"] = _wakeups(raw, servers, raw_topic, samples, seed=1)
        finally:
            raw.close()
        priority = PriorityConsumer(
            {**common, "group.id": unique("priority"), "max.priority": MAX_PRIORITY}
        )
        try:
            priority.subscribe([topic])
            _settle(priority, MAX_PRIORITY)
            idle["priority"] = _idle_cpu(priority, idle_s)
            for name, level in (("priority_highest", MAX_PRIORITY - 1), ("priority_lowest", 0)):
                latencies[name] = _wakeups(
                    priority, servers, f"{topic}-{level}", samples, seed=level
                )
        finally:
            priority.close()
    summary = {name: latency_summary(values) for name, values in latencies.items()}
    result = {
        "idle_seconds": idle_s,
        "poll_timeout_s": 1.0,
        "samples": samples,
        "smoke": args.smoke,
        "idle": idle,
        "idle_cpu_ratio": idle["priority"]["cpu_percent"] / idle["raw"]["cpu_percent"],
        "target_idle_cpu_percent": 2.0,
        "wakeup": summary,
        "target_highest_p99_ms": 50.0,
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
