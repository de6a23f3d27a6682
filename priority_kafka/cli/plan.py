"""``priority-kafka plan``: measure per-partition throughput and size partitions and shards.

The rule (docs/operations.md): a partition carries at most what one producer can write to it
and what one consumer can read from it, so

    partitions per level = ceil(level target / min(producer per partition, consumer per partition))

and a handler that takes h seconds per record needs ``ceil(target x h)`` workers, which the
executor's local shards provide without more partitions.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from priority_kafka.cli._common import (
    CliError,
    add_bootstrap,
    add_json,
    emit_json,
    example,
    level_mix,
    load_handler,
    note,
    positive,
    unique,
    weights,
)
from priority_kafka.cli._view import Progress


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "plan", help="measure per-partition throughput; recommend partitions and shards",
        description="Measure single-partition producer and consumer throughput against the "
        "broker (on a scratch topic, deleted afterwards) and the handler's time per record, "
        "then recommend partitions per level for --target records/s split by --priority-mix, "
        "and executor shards to reach it; the arithmetic is shown.",
        epilog=example("priority-kafka plan --target 20000 --priority-mix 6,3,1 "
                       "--handler-ms 5 -b localhost:9092",
                       "priority-kafka plan --target 5000 --handler mypkg.work:handle --json"),
    )
    add_bootstrap(parser, local=True)
    parser.add_argument("--target", type=positive(float, 0.001), required=True,
                        help="records per second to sustain, all levels together")
    parser.add_argument("--max-priority", "-n", type=positive(int), default=3)
    parser.add_argument("--priority-mix", type=weights, default=None, metavar="W0,W1,...",
                        help="share of each level in the target, lowest first (default: equal)")
    handler = parser.add_mutually_exclusive_group()
    handler.add_argument("--handler-ms", type=positive(float, 0), default=0.0,
                         help="handler time per record in ms (default 0)")
    handler.add_argument("--handler", type=load_handler, default=None,
                         help="package.module:function to time on the measured records")
    parser.add_argument("--value-size", type=positive(int, 0), default=100)
    parser.add_argument("--measure-seconds", type=positive(float, 0.5), default=5.0,
                        help="how long the producer measurement runs (default 5)")
    add_json(parser)
    parser.set_defaults(run=run)


def measure_producer(servers: str, topic: str, seconds: float, value_size: int,
                     progress: Callable[[int], None]) -> tuple[int, float]:
    """Records/s one producer writes to one partition (acks=1, batching), flush included."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=5, acks=1,
                             batch_size=256 * 1024)
    value = b"x" * value_size
    try:
        producer.partitions_for(topic)  # metadata first: not part of the rate
        sent, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            for _ in range(500):
                producer.send(topic, value, partition=0)
            sent += 500
            progress(500)
        producer.flush()
        return sent, sent / (time.perf_counter() - started)
    finally:
        producer.close()


def measure_consumer(servers: str, topic: str, count: int, sample: int,
                     progress: Callable[[int], None]) -> tuple[float, list[Any]]:
    """Records/s one consumer reads from one partition (from its first record); the first
    ``sample`` records, to time a handler on."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False,
                             max_poll_records=500)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        read, first, kept = 0, None, list[Any]()
        deadline = time.monotonic() + 120
        while read < count:
            if time.monotonic() > deadline:
                raise CliError(f"read only {read} of {count} records in 120 s")
            for records in consumer.poll(timeout_ms=500).values():
                first = first or time.perf_counter()
                read += len(records)
                progress(len(records))
                if len(kept) < sample:
                    kept.extend(records[: sample - len(kept)])
        assert first is not None
        return read / (time.perf_counter() - first), kept
    finally:
        consumer.close()


def time_handler(handler: Callable[[Any], Any], records: Sequence[Any],
                 budget_s: float = 3.0) -> float:
    """Mean seconds per call of ``handler`` over ``records`` (stops after ``budget_s``)."""
    calls, started = 0, time.perf_counter()
    for record in records:
        handler(record)
        calls += 1
        if time.perf_counter() - started > budget_s:
            break
    return (time.perf_counter() - started) / max(1, calls)


def recommend(producer_rate: float, consumer_rate: float, handler_s: float, target: float,
              mix: Sequence[float]) -> dict[str, Any]:
    """The sizing rule applied to measured rates (pure arithmetic; see the module docstring)."""
    per_partition = min(producer_rate, consumer_rate)
    levels = {}
    lines = [f"per-partition rate = min(producer {producer_rate:.0f}/s, consumer "
             f"{consumer_rate:.0f}/s) = {per_partition:.0f}/s"]
    for level in reversed(range(len(mix))):
        level_target = target * mix[level]
        partitions = max(1, math.ceil(level_target / per_partition))
        unsharded = max(1, math.ceil(level_target * handler_s)) if handler_s else partitions
        levels[level] = {"target_records_per_s": round(level_target, 3),
                         "partitions": partitions,
                         "partitions_without_executor": max(partitions, unsharded)}
        lines.append(f"level {level}: ceil({level_target:.0f}/s / {per_partition:.0f}/s) = "
                     f"{partitions} partition(s)")
    shards = max(1, math.ceil(target * handler_s))
    lines.append(f"shards = ceil(target {target:.0f}/s x handler {handler_s * 1000:.3f} ms) = "
                 f"{shards} worker(s)")
    if handler_s:
        without = ", ".join(f"level {level}: {v['partitions_without_executor']}"
                            for level, v in levels.items())
        lines.append(f"without local shards (one handler per partition, {1 / handler_s:.0f}/s "
                     f"each) the levels would need {without} partitions")
    return {"per_partition_records_per_s": per_partition, "levels": levels,
            "shards": shards, "arithmetic": lines}


def run(args: argparse.Namespace) -> int:
    from kafka.admin import KafkaAdminClient, NewTopic

    from priority_kafka.cli._common import bootstrap

    mix = level_mix(args.priority_mix, args.max_priority)
    with bootstrap(args.bootstrap_servers) as servers:
        topic = unique("priority-kafka-plan")
        admin = KafkaAdminClient(bootstrap_servers=servers)
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        try:
            with Progress("measuring the producer (records)", None) as progress:
                sent, producer_rate = measure_producer(
                    servers, topic, args.measure_seconds, args.value_size, progress.advance)
            with Progress("measuring the consumer (records)", sent) as progress:
                consumer_rate, sample = measure_consumer(servers, topic, sent, 2000,
                                                         progress.advance)
        finally:
            admin.delete_topics([topic])
            admin.close()
    handler_s = args.handler_ms / 1000
    if args.handler is not None:
        note("timing the handler on the records read ...")
        handler_s = time_handler(args.handler, sample)
    result = {
        "measured": {
            "producer_records_per_s": round(producer_rate, 1),
            "consumer_records_per_s": round(consumer_rate, 1),
            "handler_ms": round(handler_s * 1000, 4),
            "records": sent, "value_size": args.value_size,
        },
        "target_records_per_s": args.target,
        "priority_mix": {level: round(share, 4) for level, share in enumerate(mix)},
        # Computed from the rounded measurements, so the output's arithmetic can be checked.
        **recommend(round(producer_rate, 1), round(consumer_rate, 1),
                    round(handler_s * 1000, 4) / 1000, args.target, mix),
    }
    if args.json:
        emit_json(result)
        return 0
    measured = result["measured"]
    print(f"measured on one partition ({sent} records of {args.value_size} B): producer "
          f"{measured['producer_records_per_s']:.0f}/s, consumer "
          f"{measured['consumer_records_per_s']:.0f}/s; handler {measured['handler_ms']} ms")
    for line in result["arithmetic"]:
        print("  " + line)
    levels = ", ".join(f"level {level}: {v['partitions']}" for level, v in result["levels"].items())
    print(f"recommendation: partitions per level {levels}; ShardedExecutor(shards="
          f"{result['shards']}) in total over the consumer processes")
    return 0
