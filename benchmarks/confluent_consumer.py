"""confluent PriorityConsumer vs raw confluent_kafka.Consumer reading the same three topics.

``--records`` (300k) records of 100 B, spread evenly over the three priority topics of one
logical topic, are read to the end by a raw ``confluent_kafka.Consumer`` subscribed to the
three topics (``consume(500, 1.0)``) and by :class:`priority_kafka.confluent.PriorityConsumer`
(``max.poll.records`` 500, ``consume(500, 1.0)``), each in a fresh process and a fresh consumer
group, interleaved raw, priority, raw, priority ... for ``--rounds`` (5) rounds. Timed from the
first ``consume()`` (group joins included) to the last record; process CPU time over the same
interval. Reported: records/s and records per CPU-second of each, the per-round ratios
(priority / raw) and their medians, the load average. Target: both ratios >= 0.9.

    .venv/bin/python -m benchmarks.confluent_consumer [--smoke] [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._common import broker, parse_args, unique, write_result

NAME = "confluent_consumer"
MODULE = "benchmarks.confluent_consumer"
RECORD_SIZE = 100
MAX_PRIORITY = 3
BATCH = 500


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=300_000, help="total over the 3 levels")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")


def _child(argv: Sequence[str]) -> None:
    contender, servers, topic, group, total = argv
    common = {"bootstrap.servers": servers, "group.id": group, "auto.offset.reset": "earliest"}
    from confluent_kafka import Consumer

    from priority_kafka.confluent import PriorityConsumer

    consumer: Any
    if contender == "raw":
        consumer = Consumer(common)
        consumer.subscribe([f"{topic}-{level}" for level in range(MAX_PRIORITY)])
    else:
        consumer = PriorityConsumer(
            {**common, "max.priority": MAX_PRIORITY, "max.poll.records": BATCH}
        )
        consumer.subscribe([topic])
    wanted, seen = int(total), 0
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    deadline = start_wall + 300
    while seen < wanted:
        seen += len(consumer.consume(BATCH, 1.0))
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{seen} of {wanted} records")
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    consumer.close()
    print(json.dumps({"records": seen, "wall_s": wall, "cpu_s": cpu}))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    from benchmarks._confluent import interleave, preload, run_child
    from priority_kafka import create_priority_topics

    per_level = (3_000 if args.smoke else args.records) // MAX_PRIORITY
    rounds = 1 if args.smoke else args.rounds
    total = per_level * MAX_PRIORITY
    topic = unique("cfl-consumer")
    with broker(args) as servers:
        topics = create_priority_topics(servers, topic, MAX_PRIORITY)
        preload(servers, topics, per_level, RECORD_SIZE)
        comparison = interleave(
            ["raw", "priority"],
            rounds,
            lambda name, index: run_child(
                MODULE, [name, servers, topic, unique(f"g-{name}-{index}"), str(total)]
            ),
            subject="priority",
            baseline="raw",
        )
    result = {
        "records": total,
        "record_size": RECORD_SIZE,
        "max_poll_records": BATCH,
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
