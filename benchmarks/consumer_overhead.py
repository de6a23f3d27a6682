"""Overhead of PriorityConsumer over a raw KafkaConsumer reading the same three topics.

The same pre-loaded records (100 B, spread evenly over the three priority topics of one
logical topic) are read to the end by a raw kafka-python ``KafkaConsumer`` subscribed to the
three topics and by ``PriorityConsumer`` (``max_poll_records`` 500 in total for both, the
same fetch settings, a fresh consumer group for every read). Each read is timed from its first
``poll()`` call (so the group joins are included: one group for the raw consumer, one per
level for PriorityConsumer) to the poll that returns the last record; the rate once records
flow is reported too. The reads alternate between the two consumers and the medians are
compared, because the machine is shared. Target: ``ratio`` (PriorityConsumer / raw) >= 0.9.

    .venv/bin/python -m benchmarks.consumer_overhead [--smoke] [--records N] [--repeats R]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._common import broker, parse_args, preload, unique, write_result
from benchmarks._consumers import (
    MAX_POLL_RECORDS,
    MAX_PRIORITY,
    Drain,
    alternate,
    drain,
    priority_consumer,
    rate_comparison,
    raw_consumer,
)
from priority_kafka import create_priority_topics

NAME = "consumer_overhead"
RECORD_SIZE = 100


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=300_000, help="total over the 3 levels")
    parser.add_argument("--repeats", type=int, default=5, help="reads per consumer")
    parser.add_argument(
        "--max-poll-records", type=int, default=MAX_POLL_RECORDS, help="per poll, both consumers"
    )


def _timed_read(make: Callable[[], Any], total: int, drains: list[Drain]) -> Callable[[], float]:
    def read() -> float:
        consumer = make()
        try:
            result = drain(consumer, total, timeout_s=max(60.0, total / 2000))
        finally:
            consumer.close()
        drains.append(result)
        return result.rate

    return read


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    per_level = (3_000 if args.smoke else args.records) // MAX_PRIORITY
    repeats = 1 if args.smoke else args.repeats
    total = per_level * MAX_PRIORITY
    batch = args.max_poll_records
    topic = unique("overhead")
    with broker(args) as servers:
        topics = create_priority_topics(servers, topic, MAX_PRIORITY)
        for name in topics:
            preload(servers, name, per_level, size=RECORD_SIZE)
        drains: dict[str, list[Drain]] = {"priority": [], "raw": []}
        rates = alternate(
            {
                "priority": _timed_read(
                    lambda: priority_consumer(servers, topic, max_poll_records=batch),
                    total,
                    drains["priority"],
                ),
                "raw": _timed_read(
                    lambda: raw_consumer(servers, topics, max_poll_records=batch),
                    total,
                    drains["raw"],
                ),
            },
            repeats,
        )
    steady = {name: [d.steady_rate for d in runs] for name, runs in drains.items()}
    per_cpu = {name: [d.cpu_rate for d in runs] for name, runs in drains.items()}
    result = {
        "records": total,
        "record_size": RECORD_SIZE,
        "max_poll_records": batch,
        "repeats": repeats,
        "smoke": args.smoke,
        **rate_comparison(rates, "priority", "raw"),
        "steady": rate_comparison(steady, "priority", "raw"),
        "per_cpu_second": rate_comparison(per_cpu, "priority", "raw"),
        "polls": {name: [d.polls for d in runs] for name, runs in drains.items()},
        "seconds": {name: [d.seconds for d in runs] for name, runs in drains.items()},
        "target_ratio": 0.9,
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
