"""confluent PriorityProducer vs raw confluent_kafka.Producer producing the same records.

Each contender produces ``--records`` (300k) records of 100 B, level ``i % 3`` for the i-th
(the raw producer to ``<topic>-<level>`` itself, PriorityProducer with ``priority=level``), then
flushes; same librdkafka settings (``linger.ms`` 5). Each run is a fresh process, interleaved
raw, priority, raw, priority ... for ``--rounds`` (5) rounds; timed from the first
``produce()`` to the end of ``flush()``, process CPU time over the same interval. Reported:
records/s and records per CPU-second, per-round ratios (priority / raw), medians, load average.
Target: both ratios >= 0.9.

    .venv/bin/python -m benchmarks.confluent_producer [--smoke] [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._common import broker, parse_args, unique, write_result

NAME = "confluent_producer"
MODULE = "benchmarks.confluent_producer"
RECORD_SIZE = 100
MAX_PRIORITY = 3


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")


def _child(argv: Sequence[str]) -> None:
    contender, servers, topic, total = argv
    config = {"bootstrap.servers": servers, "linger.ms": 5, "acks": 1}
    payload = b"x" * RECORD_SIZE
    count = int(total)
    from confluent_kafka import Producer

    from priority_kafka.confluent import PriorityProducer  # imported outside the timing

    start_wall, start_cpu = time.perf_counter(), time.process_time()
    if contender == "raw":
        raw = Producer(config)
        names = [f"{topic}-{level}" for level in range(MAX_PRIORITY)]
        produce = raw.produce
        for i in range(count):
            try:
                produce(names[i % MAX_PRIORITY], payload)
            except BufferError:
                raw.poll(0.05)
                produce(names[i % MAX_PRIORITY], payload)
        raw.flush()
    else:
        producer = PriorityProducer({**config, "max.priority": MAX_PRIORITY})
        send = producer.produce
        for i in range(count):
            try:
                send(topic, payload, priority=i % MAX_PRIORITY)
            except BufferError:
                producer.poll(0.05)
                send(topic, payload, priority=i % MAX_PRIORITY)
        producer.flush()
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    print(json.dumps({"records": count, "wall_s": wall, "cpu_s": cpu}))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    from benchmarks._confluent import interleave, run_child
    from priority_kafka import create_priority_topics

    total = 3_000 if args.smoke else args.records
    rounds = 1 if args.smoke else args.rounds
    topic = unique("cfl-producer")
    with broker(args) as servers:
        create_priority_topics(servers, topic, MAX_PRIORITY)
        comparison = interleave(
            ["raw", "priority"],
            rounds,
            lambda name, index: run_child(MODULE, [name, servers, topic, str(total)]),
            subject="priority",
            baseline="raw",
        )
    result = {
        "records": total,
        "record_size": RECORD_SIZE,
        "smoke": args.smoke,
        **comparison,
        "target_ratio": 0.9,
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2:])
    else:
        main()
