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
  and ``aiokafka per level``: three raw ``AIOKafkaConsumer`` objects, one per level topic (what the
  aio PriorityConsumer runs), each asked in turn for its reserved share (287 / 142 / 71) with
  ``getmany(timeout_ms=0)``, a 1 ms sleep when none had any: what three consumers cost without
  the priority front-end's code (``aiokafka priority / aiokafka per level`` is the front-end's
  own cost);
- ``confluent``: a raw ``confluent_kafka.Consumer`` (``consume(500, 1.0)``), and ``confluent
  priority``: :class:`priority_kafka.confluent.PriorityConsumer` (``max.poll.records`` 500),
  both read as ``benchmarks.consumer_overhead --client confluent`` does.

Every read is timed from its first poll (group joins included) to the last record, with the
process CPU time (every thread) over the same interval. Reported: each contender's records/s
and records per CPU-second per round and their medians, each priority front-end's per-round
ratios to its own raw client (and the aio one's to ``aiokafka per level``), and the load
average before every run.

    .venv/bin/python -m benchmarks.client_table [--smoke] [--records N] [--rounds R]
        [--clients kafka-python aiokafka confluent]
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
#: Ratios beside PAIRS: the aio front-end against the three consumers it runs, without its code.
LEVEL_RATIOS = {"aiokafka priority": "aiokafka per level"}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=300_000, help="total over the 3 levels")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--clients", nargs="+", choices=list(PAIRS.values()),
                        default=list(PAIRS.values()),
                        help="the clients whose pair (raw and priority) runs (default: all)")


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
    consumer: Any
    if side == "priority":
        consumer = PriorityConsumer(
            topic, max_priority=MAX_PRIORITY, max_poll_records=MAX_POLL_RECORDS, **settings
        )
    elif side == "levels":
        consumer = _PerLevel(topics, settings)
    else:
        consumer = AIOKafkaConsumer(*topics, **settings)
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


class _PerLevel:
    """Three raw AIOKafkaConsumers, one per level topic in a group of its own (as the aio
    PriorityConsumer builds them, with its default fetch sizes: a third of
    ``fetch_buffer_bytes`` per level, each partition up to 1 MiB per level within it), asked in
    turn, highest level first, for their reserved shares of each batch."""

    def __init__(self, topics: list[str], settings: dict[str, Any]) -> None:
        from aiokafka import AIOKafkaConsumer

        from priority_kafka.config import DEFAULT_FETCH_BUFFER_BYTES, PriorityConfig

        # The distributor's split of MAX_POLL_RECORDS, highest level first, as the front-end's.
        reserved = PriorityConfig(
            max_priority=len(topics), max_poll_records=MAX_POLL_RECORDS
        ).reserved_quotas()
        self._shares = [reserved[level] for level in sorted(reserved, reverse=True)]
        group = settings["group_id"]
        fetch = DEFAULT_FETCH_BUFFER_BYTES // len(topics)
        sizes = {"fetch_max_bytes": fetch,
                 "max_partition_fetch_bytes": min(len(topics) << 20, fetch)}
        self._consumers = [
            AIOKafkaConsumer(name, **{**settings, **sizes, "group_id": f"{group}-{level}"})
            for level, name in sorted(enumerate(topics), reverse=True)
        ]

    async def start(self) -> None:
        for consumer in self._consumers:
            await consumer.start()

    async def stop(self) -> None:
        for consumer in self._consumers:
            await consumer.stop()

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
        found: dict[Any, list[Any]] = {}
        for consumer, share in zip(self._consumers, self._shares, strict=True):
            found.update(await consumer.getmany(timeout_ms=0, max_records=share))
        if not found:
            await asyncio.sleep(0.001)
        return found


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    rounds = 1 if args.smoke else args.rounds
    with preloaded_levels(args, "clients", MAX_PRIORITY, RECORD_SIZE) as loaded:
        total, topic, topics = loaded.total, loaded.topic, loaded.topics
        common = {"servers": loaded.servers, "total": total}
        levels = {**common, "topic": topic}
        contenders = [
            Contender("kafka-python", read_client,
                      {**levels, "client": "kafka-python", "side": "raw"}),
            Contender("kafka-python priority", read_client,
                      {**levels, "client": "kafka-python", "side": "priority"}),
            Contender("aiokafka", read_aiokafka,
                      {**levels, "topics": topics, "side": "raw"}),
            Contender("aiokafka priority", read_aiokafka,
                      {**levels, "topics": topics, "side": "priority"}),
            Contender("aiokafka per level", read_aiokafka,
                      {**levels, "topics": topics, "side": "levels"}),
            Contender("confluent", read_client,
                      {**levels, "client": "confluent", "side": "raw"}),
            Contender("confluent priority", read_client,
                      {**levels, "client": "confluent", "side": "priority"}),
        ]
        chosen = set(args.clients)
        runs = interleave(
            [c for c in contenders if c.name.split(" ")[0] in chosen], rounds
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
            for subject, baseline in [*PAIRS.items(), *LEVEL_RATIOS.items()]
            if baseline.split(" ")[0] in chosen
        },
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
