"""Wake-up latency of the aio PriorityConsumer for a record of its lowest level while the
higher levels are idle.

One logical topic of 3 levels, empty; each run (a fresh process, consumer group and topic)
starts an aio ``PriorityConsumer``, waits until every level has its partition, then
``--records`` (30) times: starts a ``getmany(timeout_ms=5000)``, waits 50 ms, sends one record
to level 0 with an ``AIOKafkaProducer`` (``send_and_wait``), and measures from the
acknowledgement to the return of the ``getmany`` that delivered it. Contenders: ``priority``
(this checkout), and with ``--code NAME=PATH`` the same on another checkout (before/after,
:mod:`benchmarks._code`); ``--rounds`` (3) interleaved rounds, the load average before every
run. Reported: per round the median and p90 in ms.

    .venv/bin/python -m benchmarks.aio_wakeup [--smoke] [--records N] [--rounds R]
        [--code before=PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import _common as common

NAME = "aio_wakeup"
LEVELS = 3


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=30, help="records per run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")


def wake_ups(servers: str, records: int) -> dict[str, Any]:
    """Contender: the latencies (ms) of ``records`` level-0 records, each sent while the
    consumer waits in ``getmany``."""
    return asyncio.run(_wake_ups(servers, records))


async def _wake_ups(servers: str, records: int) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    from priority_kafka import create_priority_topics
    from priority_kafka.aio import PriorityConsumer

    topic = common.unique("wake")
    create_priority_topics(servers, topic, LEVELS)
    consumer = PriorityConsumer(
        topic, max_priority=LEVELS, bootstrap_servers=servers, group_id=common.unique("g"),
        auto_offset_reset="earliest", enable_auto_commit=False,
    )
    producer = AIOKafkaProducer(bootstrap_servers=servers)
    await consumer.start()
    await producer.start()
    try:
        # Every level joined and assigned its partition: from here they wait on their fetches.
        while len(consumer.assignment()) < LEVELS:
            await asyncio.sleep(0.05)
        latencies = []
        for _ in range(records):
            waiting = asyncio.ensure_future(consumer.getmany(timeout_ms=5000))
            await asyncio.sleep(0.05)
            await producer.send_and_wait(f"{topic}-0", b"x")
            sent = time.perf_counter()
            if not await waiting:
                raise TimeoutError("a level-0 record did not come within 5 s")
            latencies.append((time.perf_counter() - sent) * 1000)
    finally:
        await producer.stop()
        await consumer.stop()
    return {"median_ms": statistics.median(latencies),
            "p90_ms": common.percentile(latencies, 90), "latencies_ms": latencies}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = common.parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    records, rounds = (5, 1) if args.smoke else (args.records, args.rounds)
    with common.broker(args) as servers:
        runs = common.interleave(
            [common.Contender("priority", wake_ups, {"servers": servers, "records": records})],
            rounds,
        )
    result = {
        "smoke": args.smoke, "records": records, "interleaving": runs.summary(),
        **{key: runs.values("priority", key) for key in ("median_ms", "p90_ms")},
    }
    common.write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
