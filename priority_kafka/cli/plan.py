"""``priority-kafka plan``: measure per-partition throughput and size partitions and shards.

The rule (docs/operations.md): a partition carries at most what one producer can write to it
and what one consumer can read from it, so

    partitions per level = ceil(level target / min(producer per partition, consumer per partition))

and a handler that takes h seconds per record needs ``ceil(target x h)`` workers, which the
executor's local shards provide without more partitions. One executor process has a ceiling of
its own (its bookkeeping is Python on one interpreter), so ``plan`` also measures it: a
:class:`~priority_kafka.ShardedExecutor` in this process runs the handler (a sleep of
``--handler-ms``, or ``--handler``) over the measured records with the shards the target needs,
and the target is spread over ``ceil(target / ceiling)`` processes. With more than one
process, every level gets at least as many partitions as there are processes: each level is a
consumer group of its own, assigned independently, so a level with fewer partitions leaves
members idle, and with one partition per level all of them can land on one process (which then
carries the whole target, above its ceiling) with nothing to fail over to.
"""

from __future__ import annotations

import argparse
import itertools
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from priority_kafka.cli._common import (
    CliError,
    add_app_dir,
    add_bootstrap,
    add_json,
    emit_json,
    example,
    handler_spec,
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
    handler.add_argument("--handler", type=handler_spec, default=None,
                         help="package.module:function to time on the measured records")
    add_app_dir(parser)
    parser.add_argument("--max-shards", type=positive(int), default=256,
                        help="most shards one executor process is given (default 256)")
    parser.add_argument("--value-size", type=positive(int, 0), default=100)
    parser.add_argument("--measure-seconds", type=positive(float, 0.5), default=5.0,
                        help="how long the producer and the executor measurements each run "
                        "(default 5)")
    add_json(parser)
    parser.set_defaults(run=run)


def measure_producer(servers: str, topic: str, seconds: float, value_size: int,
                     progress: Callable[[int], None]) -> tuple[int, float]:
    """Records/s one producer writes to one partition (acks=1, batching), flush included."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=5, acks=1,
                             batch_size=256 * 1024)
    value = b"x" * value_size
    # Keys, so the executor's measurement has lanes to spread over its shards.
    keys = itertools.cycle([str(key).encode() for key in range(_KEYS)])
    try:
        producer.partitions_for(topic)  # metadata first: not part of the rate
        sent, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            for _ in range(500):
                producer.send(topic, value, key=next(keys), partition=0)
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


def measure_executor(servers: str, topic: str, handler: Callable[[Any], Any], shards: int,
                     seconds: float, available: int) -> tuple[int, float]:
    """Records/s one :class:`~priority_kafka.ShardedExecutor` process sustains with ``handler``
    on ``shards`` workers, reading the scratch topic from its start for ``seconds`` (or until
    its ``available`` records are handled), counted from the first handled record."""
    from kafka import KafkaConsumer

    from priority_kafka import ShardedExecutor

    first: list[float] = []  # when the first record was handled
    stopped: list[tuple[float, int]] = []  # when the window closed, and what was handled by then
    finished = threading.Event()

    def timed(record: Any) -> None:
        if not first:
            first.append(time.perf_counter())
        handler(record)

    consumer = KafkaConsumer(bootstrap_servers=servers, group_id=unique("priority-kafka-plan"),
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             max_poll_records=500)
    executor = ShardedExecutor(consumer, timed, shards=shards, ordering="key")

    def stop_when_measured() -> None:
        deadline = time.monotonic() + 120  # the group join included; the window starts later
        while not finished.wait(0.05):
            window_over = first and time.perf_counter() - first[0] >= seconds
            if window_over or executor.stats().handled >= available or \
                    time.monotonic() > deadline:
                break
        stopped.append((time.perf_counter(), executor.stats().handled))
        executor.stop()

    executor.subscribe([topic])
    watcher = threading.Thread(target=stop_when_measured, name="plan-executor-window")
    watcher.start()
    try:
        executor.run()
    finally:
        finished.set()
        watcher.join()
        consumer.close()
    if not first or not stopped:
        raise CliError(f"the executor handled no record of {topic} in 120 s")
    (stopped_at, handled), = stopped
    return handled, handled / max(1e-9, stopped_at - first[0])


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
              mix: Sequence[float], process_rate: float | None = None,
              max_shards: int = 256) -> dict[str, Any]:
    """The sizing rule applied to measured rates (pure arithmetic; see the module docstring).

    ``process_rate`` is what one executor process sustained with the handler (None: not
    measured, one process assumed)."""
    per_partition = min(producer_rate, consumer_rate)
    processes = max(1, math.ceil(target / process_rate)) if process_rate else 1
    levels = {}
    lines = [f"per-partition rate = min(producer {producer_rate:.0f}/s, consumer "
             f"{consumer_rate:.0f}/s) = {per_partition:.0f}/s"]
    if process_rate:
        lines.append(f"processes = ceil(target {target:.0f}/s / one executor process "
                     f"{process_rate:.0f}/s) = {processes}")
    for level in reversed(range(len(mix))):
        level_target = target * mix[level]
        by_rate = max(1, math.ceil(level_target / per_partition))
        # One partition per process at least (see the module docstring): the levels' groups
        # assign independently, so fewer could put several levels' load on one process.
        partitions = max(by_rate, processes)
        unsharded = max(1, math.ceil(level_target * handler_s)) if handler_s else partitions
        levels[level] = {"target_records_per_s": round(level_target, 3),
                         "partitions": partitions,
                         "partitions_without_executor": max(partitions, unsharded)}
        line = (f"level {level}: ceil({level_target:.0f}/s / {per_partition:.0f}/s) = "
                f"{by_rate} partition(s)")
        if partitions != by_rate:
            line += f"; at least one per process: {partitions}"
        lines.append(line)
    shards = max(1, math.ceil(target * handler_s))
    per_process = min(max_shards, max(1, math.ceil(target / processes * handler_s)))
    lines.append(f"shards = ceil(target {target:.0f}/s x handler {handler_s * 1000:.3f} ms) = "
                 f"{shards} worker(s) in all, {per_process} per process")
    if handler_s:
        without = ", ".join(f"level {level}: {v['partitions_without_executor']}"
                            for level, v in levels.items())
        lines.append(f"without local shards (one handler per partition, {1 / handler_s:.0f}/s "
                     f"each) the levels would need {without} partitions")
    return {"per_partition_records_per_s": per_partition, "levels": levels,
            "shards": shards, "processes": processes, "shards_per_process": per_process,
            "arithmetic": lines}


def run(args: argparse.Namespace) -> int:
    from kafka.admin import KafkaAdminClient, NewTopic

    from priority_kafka.cli._common import bootstrap

    mix = level_mix(args.priority_mix, args.max_priority)
    user_handler = load_handler(args.handler, args.app_dir) if args.handler else None
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
            handler_s = args.handler_ms / 1000
            if user_handler is not None:
                note("timing the handler on the records read ...")
                handler_s = time_handler(user_handler, sample)
            handler = user_handler or _sleeper(handler_s)
            shards = min(args.max_shards, max(1, math.ceil(args.target * handler_s)))
            note(f"measuring one executor process: the handler on {shards} shard(s) for "
                 f"{args.measure_seconds:g} s ...")
            handled, process_rate = measure_executor(servers, topic, handler, shards,
                                                     args.measure_seconds, sent)
        finally:
            admin.delete_topics([topic])
            admin.close()
    result = {
        "measured": {
            "producer_records_per_s": round(producer_rate, 1),
            "consumer_records_per_s": round(consumer_rate, 1),
            "handler_ms": round(handler_s * 1000, 4),
            "executor_records_per_s": round(process_rate, 1),
            "executor_shards": shards, "executor_records": handled,
            "records": sent, "value_size": args.value_size,
        },
        "target_records_per_s": args.target,
        "priority_mix": {level: round(share, 4) for level, share in enumerate(mix)},
        # Computed from the rounded measurements, so the output's arithmetic can be checked.
        **recommend(round(producer_rate, 1), round(consumer_rate, 1),
                    round(handler_s * 1000, 4) / 1000, args.target, mix,
                    round(process_rate, 1), args.max_shards),
    }
    if args.json:
        emit_json(result)
        return 0
    measured = result["measured"]
    print(f"measured on one partition ({sent} records of {args.value_size} B): producer "
          f"{measured['producer_records_per_s']:.0f}/s, consumer "
          f"{measured['consumer_records_per_s']:.0f}/s; handler {measured['handler_ms']} ms; "
          f"one executor process with {shards} shard(s) "
          f"{measured['executor_records_per_s']:.0f}/s")
    for line in result["arithmetic"]:
        print("  " + line)
    print(recommendation(result))
    return 0


def recommendation(result: dict[str, Any]) -> str:
    """The last line of ``plan``: processes, shards per process and partitions per level."""
    levels = ", ".join(f"{v['partitions']} for level {level}"
                       for level, v in result["levels"].items())
    return (f"recommendation: {result['processes']} consumer process(es), each "
            f"ShardedExecutor(shards={result['shards_per_process']}); partitions: {levels}")


#: Distinct keys the producer measurement writes, so the executor's key lanes spread.
_KEYS = 1000


def _sleeper(seconds: float) -> Callable[[Any], None]:
    """A handler that takes ``seconds`` per record (the ``--handler-ms`` stand-in)."""
    if seconds <= 0:
        return lambda record: None

    def handle(record: Any) -> None:
        time.sleep(seconds)

    return handle
