"""High-priority latency behind a low-priority backlog: PriorityConsumer vs one FIFO topic.

Both sides start with the same backlog of low-priority records (100 B): on the lowest level
(``<topic>-0``) for PriorityConsumer, on a single-partition FIFO topic for a raw kafka-python
``KafkaConsumer``. Once the consumer returns its first records, high-priority records are
produced at a steady rate (``--rate``, 50/s) carrying their send time: to the highest level
(``<topic>-2``) for PriorityConsumer, to the FIFO topic itself for the raw consumer. The
consumer handles every record at a fixed cost (``--handler-us`` per record, 100 us, slept once
per batch: a handler waiting on I/O, which keeps the backlog draining for a while without
burning the shared CPU). Production stops when the backlog has been read; the run ends when
every high-priority record has arrived.

Latency is send() call to the return of the ``poll()`` that delivered the record. Each side's
run is a fresh process with fresh topics (its backlog produced first, untimed); the sides take
turns for ``--rounds`` rounds (priority first in even rounds, FIFO first in odd ones).
Reported: p50/p99 per side over every round's records, per round, and ``p99_ratio`` = the
median over the rounds of FIFO p99 / PriorityConsumer p99 of the same round (target >= 50;
``per_round`` has each round's ratio, min and max, and the load average before every run),
and ``latency_cdf.png``, the two distributions (all rounds) as CDFs on a log axis.
``max_poll_records`` is 500 for both.

    .venv/bin/python -m benchmarks.priority_latency [--smoke] [--backlog N] [--rate R] [--rounds R]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._common import (
    broker,
    create_topics,
    interleave_sides,
    parse_args,
    preload,
    unique,
    write_result,
)
from benchmarks._consumers import (
    MAX_POLL_RECORDS,
    MAX_PRIORITY,
    Pacer,
    is_stamped,
    latency_summary,
    low_latency_producer,
    plot_cdfs,
    priority_consumer,
    raw_consumer,
    stamp_of,
)
from priority_kafka import create_priority_topics, priority_topic

NAME = "priority_latency"


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backlog", type=int, default=100_000, help="low-priority records")
    parser.add_argument("--rate", type=float, default=50.0, help="high-priority records/s")
    parser.add_argument("--handler-us", type=float, default=100.0, help="cost per record (us)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per side")


def _measure(
    consumer: Any,
    pacer: Pacer,
    backlog: int,
    handler_s: float,
    timeout_s: float,
) -> tuple[list[float], float]:
    """Drain the backlog while ``pacer`` sends high-priority records; their latencies, drain time.

    The pacer starts when the first records arrive, so the group join is not counted.
    """
    latencies: list[float] = []
    low = 0
    sent: int | None = None
    drained_in = float("nan")
    start = time.perf_counter()
    deadline = start + timeout_s
    try:
        while sent is None or len(latencies) < sent:
            if time.perf_counter() > deadline:
                raise TimeoutError(
                    f"read {low} of {backlog} backlog and {len(latencies)} of {sent} "
                    f"high-priority records in {timeout_s:g} s"
                )
            # Until it has partitions, a consumer joins with long polls: kafka-python alone
            # throws away a join that finished between two short ones and can keep
            # rejoining (REPLACES_FINISHED_JOIN); the join is not what this measures.
            batch = consumer.poll(timeout_ms=100 if consumer.assignment() else 1000)
            returned = time.perf_counter()
            count = 0
            for records in batch.values():
                for record in records:
                    if is_stamped(record.value):
                        latencies.append(returned - stamp_of(record.value))
                    else:
                        low += 1
                count += len(records)
            if count and not pacer.is_alive() and sent is None:
                pacer.start()
            if low >= backlog and sent is None:
                drained_in = returned - start
                sent = pacer.finish()
            time.sleep(count * handler_s)
    finally:
        pacer.finish_if_running()
    return latencies, drained_in


def run_side(
    bootstrap_servers: str, side: str, backlog: int, rate: float, handler_s: float
) -> dict[str, Any]:
    """Contender: fresh topics with the backlog, then one side's high-priority latencies.

    ``side`` "priority": PriorityConsumer, backlog on level 0, high records on the highest
    level; "fifo": a raw consumer of one topic holding both.
    """
    if side == "priority":
        topic = unique("latency")
        create_priority_topics(bootstrap_servers, topic, MAX_PRIORITY)
        preload(bootstrap_servers, priority_topic(topic, 0), backlog)
        consumer = priority_consumer(bootstrap_servers, topic)
        target = priority_topic(topic, MAX_PRIORITY - 1)
    else:
        target = unique("latency-fifo")
        create_topics(bootstrap_servers, [target])
        preload(bootstrap_servers, target, backlog)
        consumer = raw_consumer(bootstrap_servers, [target])
    producer = low_latency_producer(bootstrap_servers)
    try:
        latencies, drained_in = _measure(
            consumer,
            Pacer(producer, target, lambda: 1 / rate),
            backlog,
            handler_s,
            timeout_s=120 + backlog * (handler_s + 50e-6),
        )
    finally:
        consumer.close()
        producer.close()
    return {"latencies": latencies, "drain_seconds": drained_in, **latency_summary(latencies)}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    backlog = 3_000 if args.smoke else args.backlog
    rounds = 1 if args.smoke else args.rounds
    handler_s = args.handler_us / 1e6
    with broker(args) as servers:
        runs = interleave_sides(
            run_side, ("priority", "fifo"), rounds,
            bootstrap_servers=servers, backlog=backlog, rate=args.rate, handler_s=handler_s,
        )
    latencies = {side: runs.pooled(side, "latencies") for side in ("priority", "fifo")}
    summary = {name: latency_summary(values) for name, values in latencies.items()}
    plot_cdfs(
        args.out / "latency_cdf.png",
        {
            "PriorityConsumer, level 2": latencies["priority"],
            "one FIFO topic": latencies["fifo"],
        },
        f"High-priority latency behind {backlog:,} queued records "
        f"({args.rate:g}/s, {args.handler_us:g} us/record handler, {rounds} rounds)",
    )
    p50 = runs.compare("p50_ms", "fifo", "priority")
    p99 = runs.compare("p99_ms", "fifo", "priority")
    result = {
        "backlog": backlog,
        "rate_per_s": args.rate,
        "handler_us_per_record": args.handler_us,
        "max_poll_records": MAX_POLL_RECORDS,
        "rounds": rounds,
        "smoke": args.smoke,
        "latency": summary,
        "backlog_drain_seconds": {
            side: runs.values(side, "drain_seconds") for side in ("priority", "fifo")
        },
        "p50_ratio": p50["ratio"],
        "p99_ratio": p99["ratio"],
        "per_round": {"p50_ms": p50, "p99_ms": p99},
        "interleaving": runs.summary(),
        "target_p99_ratio": 50,
        "plot": "latency_cdf.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
