"""confluent PriorityProducer vs raw confluent_kafka.Producer producing the same records.

Each contender produces ``--records`` (300k) records of 100 B, level ``i % 3`` for the i-th
(the raw producer to ``<topic>-<level>`` itself, PriorityProducer with ``priority=level``), then
flushes; same librdkafka settings (``linger.ms`` 5). Each run is a fresh process, interleaved
raw, priority, then priority, raw ... for ``--rounds`` (5) rounds; timed from the first
``produce()`` to the end of ``flush()``, process CPU time over the same interval. Reported:
records/s and records per CPU-second, per-round ratios (priority / raw), medians, load average.
Target: both ratios >= 0.9.

    .venv/bin/python -m benchmarks.confluent_producer [--smoke] [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from benchmarks._common import (
    broker,
    compare_rates,
    interleave_sides,
    parse_args,
    timed,
    unique,
    write_result,
)

NAME = "confluent_producer"
RECORD_SIZE = 100
MAX_PRIORITY = 3


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")


def produce_all(side: str, servers: str, topic: str, total: int) -> dict[str, Any]:
    """One contender's run (in a fresh process): produce ``total`` records and flush, timed."""
    from confluent_kafka import Producer

    from priority_kafka.confluent import PriorityProducer  # imported outside the timing

    config = {"bootstrap.servers": servers, "linger.ms": 5, "acks": 1}
    payload = b"x" * RECORD_SIZE
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    if side == "raw":
        raw = Producer(config)
        names = [f"{topic}-{level}" for level in range(MAX_PRIORITY)]
        produce = raw.produce
        for i in range(total):
            try:
                produce(names[i % MAX_PRIORITY], payload)
            except BufferError:
                _when_queued(raw, partial(produce, names[i % MAX_PRIORITY], payload))
        raw.flush()
    else:
        producer = PriorityProducer({**config, "max.priority": MAX_PRIORITY})
        send = producer.produce
        for i in range(total):
            try:
                send(topic, payload, priority=i % MAX_PRIORITY)
            except BufferError:
                _when_queued(producer, partial(send, topic, payload, priority=i % MAX_PRIORITY))
        producer.flush()
    return timed(total, start_wall, start_cpu)


def _when_queued(producer: Any, produce: Callable[[], None]) -> None:
    """Serve deliveries until librdkafka's full queue takes ``produce()`` (both sides alike)."""
    while True:
        producer.poll(0.05)
        try:
            produce()
            return
        except BufferError:
            continue


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    from priority_kafka import create_priority_topics

    total = 3_000 if args.smoke else args.records
    rounds = 1 if args.smoke else args.rounds
    topic = unique("cfl-producer")
    with broker(args) as servers:
        create_priority_topics(servers, topic, MAX_PRIORITY)
        runs = interleave_sides(
            produce_all, ("raw", "priority"), rounds, servers=servers, topic=topic, total=total
        )
    result = {
        "records": total,
        "record_size": RECORD_SIZE,
        "smoke": args.smoke,
        **compare_rates(runs, "priority", "raw"),
        "target_ratio": 0.9,
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
