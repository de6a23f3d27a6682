"""The three priority front-ends beside the raw clients they wrap, on the same records.

``--records`` (300k) records of 100 B, spread evenly over the three priority topics of one
logical topic, are read to the end by six contenders, each in a fresh process and a fresh
consumer group, taking turns for ``--rounds`` (3) rounds (A B C D E F, F E D C B A, ...):

- ``kafka-python``: a raw ``KafkaConsumer`` subscribed to the three topics (``poll()``, 500 per
  poll), and ``kafka-python priority``: :class:`priority_kafka.PriorityConsumer`
  (``max_poll_records`` 500), both read as ``benchmarks.consumer_overhead --client
  kafka-python`` does;
- ``aiokafka``: a raw ``AIOKafkaConsumer`` subscribed to the three topics
  (``getmany(timeout_ms=1000, max_records=500)``), and ``aiokafka priority``:
  :class:`priority_kafka.aio.PriorityConsumer` (``max_poll_records`` 500) read the same way;
- ``confluent``: a raw ``confluent_kafka.Consumer`` (``consume(500, 1.0)``), and ``confluent
  priority``: :class:`priority_kafka.confluent.PriorityConsumer` (``max.poll.records`` 500),
  both read as ``benchmarks.consumer_overhead --client confluent`` does.

Every read is timed from its first poll (group joins included) to the last record, with the
process CPU time (every thread) over the same interval. Reported: each contender's records/s
and records per CPU-second per round and their medians, each priority front-end's per-round
ratios to its own raw client, and the load average before every run.

    .venv/bin/python -m benchmarks.client_table [--smoke] [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._common import (
    Contender,
    interleave,
    parse_args,
    preloaded_levels,
    timed,
    unique,
    write_result,
)
from benchmarks._consumers import MAX_POLL_RECORDS, MAX_PRIORITY, read_levels

NAME = "client_table"
RECORD_SIZE = 100
#: Each priority front-end and the raw client it wraps (the baseline of its ratios).
PAIRS = {
    "kafka-python priority": "kafka-python", "aiokafka priority": "aiokafka",
    "confluent priority": "confluent",
}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=300_000, help="total over the 3 levels")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")


def read_client(client: str, side: str, servers: str, topic: str, total: int) -> dict[str, Any]:
    """Contender: ``client``'s raw consumer or PriorityConsumer (``side``), as consumer_overhead
    reads."""
    drained = read_levels(client, side, servers, topic, total, MAX_POLL_RECORDS)
    return {"records_per_s": drained["rate"], "records_per_cpu_s": drained["cpu_rate"]}


def read_aiokafka(
    servers: str, topic: str, topics: list[str], total: int, side: str
) -> dict[str, Any]:
    """Contender: a raw aiokafka consumer of the level ``topics``, or the aio PriorityConsumer
    of the logical ``topic`` (``side`` "priority"), reads ``total`` records with
    ``getmany``."""
    return asyncio.run(_read_aiokafka(servers, topic, topics, total, side))


async def _read_aiokafka(
    servers: str, topic: str, topics: list[str], total: int, side: str
) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer

    from priority_kafka.aio import PriorityConsumer

    settings = {"bootstrap_servers": servers, "group_id": unique("g-aiokafka"),
                "auto_offset_reset": "earliest", "enable_auto_commit": False}
    consumer: Any = (
        PriorityConsumer(topic, max_priority=MAX_PRIORITY, max_poll_records=MAX_POLL_RECORDS,
                         **settings)
        if side == "priority" else AIOKafkaConsumer(*topics, **settings)
    )
    await consumer.start()
    try:
        seen = 0
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        deadline = start_wall + 300
        while seen < total:
            batches = await consumer.getmany(timeout_ms=1000, max_records=MAX_POLL_RECORDS)
            seen += sum(map(len, batches.values()))
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{seen} of {total} records")
        return timed(seen, start_wall, start_cpu)
    finally:
        await consumer.stop()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    rounds = 1 if args.smoke else args.rounds
    with preloaded_levels(args, "clients", MAX_PRIORITY, RECORD_SIZE) as loaded:
        total, topic, topics = loaded.total, loaded.topic, loaded.topics
        common = {"servers": loaded.servers, "total": total}
        levels = {**common, "topic": topic}
        runs = interleave(
            [
                Contender("kafka-python", read_client,
                          {**levels, "client": "kafka-python", "side": "raw"}),
                Contender("kafka-python priority", read_client,
                          {**levels, "client": "kafka-python", "side": "priority"}),
                Contender("aiokafka", read_aiokafka,
                          {**levels, "topics": topics, "side": "raw"}),
                Contender("aiokafka priority", read_aiokafka,
                          {**levels, "topics": topics, "side": "priority"}),
                Contender("confluent", read_client,
                          {**levels, "client": "confluent", "side": "raw"}),
                Contender("confluent priority", read_client,
                          {**levels, "client": "confluent", "side": "priority"}),
            ],
            rounds,
        )
    keys = ("records_per_s", "records_per_cpu_s")
    result = {
        "records": total,
        "record_size": RECORD_SIZE,
        "max_poll_records": MAX_POLL_RECORDS,
        "smoke": args.smoke,
        **runs.summary(),
        "per_round": {key: {name: runs.values(name, key) for name in runs.results} for key in keys},
        "medians": {
            key: {name: statistics.median(runs.values(name, key)) for name in runs.results}
            for key in keys
        },
        "ratios": {
            f"{subject} / {baseline}": {key: runs.compare(key, subject, baseline) for key in keys}
            for subject, baseline in PAIRS.items()
        },
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
