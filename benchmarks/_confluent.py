"""What the confluent-kafka benchmarks share: preloading with librdkafka, and rates.

The contenders run through :func:`benchmarks._common.interleave` (a fresh process per run,
A B, B A, ...); each returns :func:`timed` figures, ``cpu_s`` being its process CPU time over the
timed interval (every thread, librdkafka's included).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
from confluent_kafka import Producer

from benchmarks._common import Interleaved, broker, create_level_topics, replication, unique


def preload(servers: str, topics: Sequence[str], per_topic: int, size: int = 100) -> None:
    """Produce ``per_topic`` records of ``size`` bytes to each topic with confluent's Producer."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20,
                         "acks": replication(servers).acks})
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


def timed(records: int, start_wall: float, start_cpu: float) -> dict[str, float]:
    """Records, wall and CPU seconds since ``start_wall``/``start_cpu``, and both rates."""
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    return {
        "records": records,
        "wall_s": wall,
        "cpu_s": cpu,
        "records_per_s": records / wall,
        "records_per_cpu_s": records / cpu,
    }


def compare_rates(
    runs: Interleaved, subject: str, baseline: str, keys: Sequence[str] = ("records_per_s",
    "records_per_cpu_s")
) -> dict[str, Any]:
    """Per-round values and ratios subject / baseline of each rate in ``keys``."""
    return {**runs.summary(), **{key: runs.compare(key, subject, baseline) for key in keys}}


@attrs.frozen
class Preloaded:
    """Priority topics holding the same number of records per level, and where they are."""

    servers: str
    topic: str
    topics: list[str]
    total: int


@contextlib.contextmanager
def preloaded_levels(
    args: argparse.Namespace, prefix: str, levels: int, size: int = 100
) -> Iterator[Preloaded]:
    """The broker of ``args`` with a new logical topic of ``levels`` levels sharing
    ``args.records`` (3,000 with ``--smoke``) records of ``size`` bytes evenly."""
    per_level = (3_000 if args.smoke else args.records) // levels
    topic = unique(prefix)
    with broker(args) as servers:
        topics = create_level_topics(servers, topic, levels)
        preload(servers, topics, per_level, size)
        yield Preloaded(servers, topic, topics, per_level * levels)
