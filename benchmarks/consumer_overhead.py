"""Overhead of PriorityConsumer over a raw KafkaConsumer reading the same three topics.

The same pre-loaded records (100 B, spread evenly over the three priority topics of one
logical topic) are read to the end by a raw kafka-python ``KafkaConsumer`` subscribed to the
three topics and by ``PriorityConsumer`` (``max_poll_records`` 500 in total for both unless
``--max-poll-records``, kafka-python's default fetch settings, a fresh consumer group for
every read). Each read is timed from its first ``poll()`` call (so the group joins are
included: one group for the raw consumer, one per level for PriorityConsumer) to the poll that
returns the last record. Each read runs in a fresh process; the two consumers take turns,
``--rounds`` rounds (priority then raw in even rounds, raw then priority in odd ones), because
the machine is shared. Target: ``ratio`` (the median over the rounds of PriorityConsumer / raw
records/s of the same round) >= 0.9; ``ratio_per_round``, its min and max beside it, and the
load average before every read under ``interleaving``. Also reported: the same ratios once
records flow (``steady``) and per CPU second of the reading process (``per_cpu_second``, less
sensitive to the other processes on the machine).

    .venv/bin/python -m benchmarks.consumer_overhead [--smoke] [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from benchmarks._common import broker, parse_args, preload, unique, write_result
from benchmarks._consumers import MAX_POLL_RECORDS, MAX_PRIORITY, compare_drains
from priority_kafka import create_priority_topics

NAME = "consumer_overhead"
RECORD_SIZE = 100


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=300_000, help="total over the 3 levels")
    parser.add_argument("--rounds", type=int, default=5, help="reads per consumer")
    parser.add_argument(
        "--max-poll-records", type=int, default=MAX_POLL_RECORDS, help="per poll, both consumers"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    per_level = (3_000 if args.smoke else args.records) // MAX_PRIORITY
    rounds = 1 if args.smoke else args.rounds
    total = per_level * MAX_PRIORITY
    batch = args.max_poll_records
    topic = unique("overhead")
    with broker(args) as servers:
        topics = create_priority_topics(servers, topic, MAX_PRIORITY)
        for name in topics:
            preload(servers, name, per_level, size=RECORD_SIZE)
        settings = {"max_poll_records": batch}
        comparison = compare_drains(
            servers,
            {"priority": ("priority", [topic], settings), "raw": ("raw", topics, settings)},
            total,
            rounds,
        )
    result = {
        "records": total,
        "record_size": RECORD_SIZE,
        "max_poll_records": batch,
        "rounds": rounds,
        "smoke": args.smoke,
        **comparison,
        "target_ratio": 0.9,
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
