"""confluent PriorityConsumer vs raw confluent_kafka.Consumer reading the same three topics.

``--records`` (300k) records of 100 B, spread evenly over the three priority topics of one
logical topic, are read to the end by a raw ``confluent_kafka.Consumer`` subscribed to the
three topics (``consume(500, 1.0)``) and by :class:`priority_kafka.confluent.PriorityConsumer`
(``max.poll.records`` 500, ``consume(500, 1.0)``), each in a fresh process and a fresh consumer
group, interleaved raw, priority, raw, priority ... for ``--rounds`` (5) rounds. Timed from the
first ``consume()`` (group joins included: three groups for PriorityConsumer, one for the raw
consumer) to the last record, and again from the first record on (``steady_*``: reading alone);
process CPU time over the same intervals. Reported: records/s and records per CPU-second of
each, the per-round ratios (priority / raw) with median, min and max, the load average before
each run. Target: both ratios >= 0.9.

    .venv/bin/python -m benchmarks.confluent_consumer [--smoke] [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._common import interleave_sides, parse_args, unique, write_result

NAME = "confluent_consumer"
RECORD_SIZE = 100
MAX_PRIORITY = 3
BATCH = 500


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=300_000, help="total over the 3 levels")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")


def read_all(side: str, servers: str, topic: str, total: int) -> dict[str, Any]:
    """One contender's run (in a fresh process and a fresh group): read ``total`` records."""
    from confluent_kafka import Consumer

    from benchmarks._confluent import timed
    from priority_kafka.confluent import PriorityConsumer

    common = {
        "bootstrap.servers": servers, "group.id": unique(f"g-{side}"),
        "auto.offset.reset": "earliest",
    }
    consumer: Any
    if side == "raw":
        consumer = Consumer(common)
        consumer.subscribe([f"{topic}-{level}" for level in range(MAX_PRIORITY)])
    else:
        consumer = PriorityConsumer(
            {**common, "max.priority": MAX_PRIORITY, "max.poll.records": BATCH}
        )
        consumer.subscribe([topic])
    seen = 0
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    deadline = start_wall + 300
    steady: tuple[int, float, float] | None = None
    while seen < total:
        seen += len(consumer.consume(BATCH, 1.0))
        if steady is None and seen:
            # Group joins over: the rest is the steady reading rate.
            steady = seen, time.perf_counter(), time.process_time()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{seen} of {total} records")
    result = timed(seen, start_wall, start_cpu)
    assert steady is not None
    after_join = timed(seen - steady[0], steady[1], steady[2])
    consumer.close()
    return {
        **result,
        "steady_records_per_s": after_join["records_per_s"],
        "steady_records_per_cpu_s": after_join["records_per_cpu_s"],
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    from benchmarks._confluent import compare_rates, preloaded_levels

    rounds = 1 if args.smoke else args.rounds
    with preloaded_levels(args, "cfl-consumer", MAX_PRIORITY, RECORD_SIZE) as loaded:
        total = loaded.total
        runs = interleave_sides(
            read_all, ("raw", "priority"), rounds,
            servers=loaded.servers, topic=loaded.topic, total=total,
        )
    result = {
        "records": total,
        "record_size": RECORD_SIZE,
        "max_poll_records": BATCH,
        "smoke": args.smoke,
        **compare_rates(
            runs, "priority", "raw",
            ("records_per_s", "records_per_cpu_s", "steady_records_per_s",
             "steady_records_per_cpu_s"),
        ),
        "target_ratio": 0.9,
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
