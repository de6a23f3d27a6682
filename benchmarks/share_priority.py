"""Priority over share groups against one share group over one topic (the FIFO baseline), and
how far a share group's members scale past the partition count.

**Latency** (sides ``priority`` and ``fifo``, interleaved fresh-process rounds): a
:class:`~priority_kafka.confluent.ShareExecutor` handles a backlog of ``--backlog`` level-0
records; once 5 % of it is handled, ``--urgent`` urgent records are produced, one every
``--interval`` seconds. ``priority``: the urgent records go to level 2 of a 3-level
PriorityShareConsumer (one share group per level); ``fifo``: to the backlog's own topic, read by
one share group (a 1-level PriorityShareConsumer, the same executor). Reported per round: the
urgent records' latency (produced to handled; p50, p99, max), the backlog's drain time, the
delivery-count histogram per level, records released, expired, archived (this member's) and
handled twice, and that every record was handled.

**Scaling** (sides ``members-1``, ``members-2``, ...): M member processes, each a
ShareExecutor (``--shards`` workers, a handler that waits ``--handler-ms``, an I/O-bound job)
over a 3-level PriorityShareConsumer of one partition per level, share one group per level
while a backlog lasts; reported: records per second over ``--window`` seconds once every
member handles records, the speed-up over one member, per-member counts, delivery counts and
archived records. The ideal is linear: M * shards / handler time.

    .venv/bin/python -m benchmarks.share_priority [--smoke] [--rounds R] [--backlog N]
        [--urgent N] [--interval S] [--members 1,2,4,8] [--window S]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from benchmarks._common import (
    Contender,
    broker,
    interleave,
    interleave_sides,
    parse_args,
    percentile,
    preload,
    unique,
    wait_until,
    write_result,
)
from benchmarks._group_configs import set_group_configs

NAME = "share_priority"
SIDES = ("priority", "fifo")
LEVELS = 3
# Each level's fetch asks for this many records (the latency backlog is preloaded in producer
# batches of about 2,000 records, which the broker hands out whole).
MAX_POLL_RECORDS = 500
# The scaling members ask for less, and their backlog comes in batches of this many records,
# as jobs produced one by one do: a member acquires what its workers start soon, and the
# members share the backlog.
SCALING_POLL_RECORDS = 50
SCALING_BATCH = 20


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backlog", type=int, default=100_000,
                        help="lower-priority records waiting when the urgent ones come")
    parser.add_argument("--urgent", type=int, default=100, help="urgent records per run")
    parser.add_argument("--interval", type=float, default=0.02,
                        help="seconds between urgent records")
    parser.add_argument("--shards", type=int, default=4, help="workers per executor")
    parser.add_argument("--members", default="1,2,4,8", help="member counts to scale over")
    parser.add_argument("--window", type=float, default=6.0,
                        help="seconds the scaling rate is measured over")
    parser.add_argument("--handler-ms", type=float, default=10.0,
                        help="how long the scaling handler waits per record")
    parser.add_argument("--scaling-backlog", type=int, default=30_000,
                        help="records for the scaling runs (spread over the levels)")


def _share_consumer(servers: str, topic: str, group: str, levels: int,
                    max_poll_records: int = MAX_POLL_RECORDS) -> Any:
    """A PriorityShareConsumer of ``topic`` whose level groups read from the earliest offset
    (share.auto.offset.reset is a group config, 'latest' by default)."""
    from priority_kafka.confluent import PriorityShareConsumer

    set_group_configs(servers, [f"{group}-{level}" for level in range(levels)],
                      {"share.auto.offset.reset": "earliest"})
    consumer = PriorityShareConsumer({
        "bootstrap.servers": servers, "group.id": group, "max.priority": levels,
        "max.poll.records": max_poll_records,
    })
    consumer.subscribe([topic])
    return consumer


def _run_figures(stats: Any) -> dict[str, Any]:
    """The executor's per-level figures the benchmark reports."""
    return {
        "delivery_counts": {level: dict(figures.delivery_counts)
                            for level, figures in stats.levels.items()},
        "released": stats.total("released"),
        "released_unstarted": stats.total("released_unstarted"),
        "lock_expired": stats.total("lock_expired"),
        "archived": stats.total("archived"),
        "ack_failures": stats.total("ack_failures"),
    }


def latency_side(
    bootstrap_servers: str, side: str, backlog: int, urgent: int, interval: float, shards: int
) -> dict[str, Any]:
    """Contender: urgent records' latency through a backlog, by priority or FIFO."""
    from confluent_kafka import Producer

    from priority_kafka import create_priority_topics
    from priority_kafka.confluent import ShareExecutor

    levels = LEVELS if side == "priority" else 1
    topic, group = unique("share-latency"), unique("share-latency")
    create_priority_topics(bootstrap_servers, topic, levels)
    preload(bootstrap_servers, f"{topic}-0", backlog)
    handled: Counter[tuple[str, int]] = Counter()
    urgent_at: dict[int, float] = {}
    lock = threading.Lock()

    def handler(record: Any) -> None:
        now = time.monotonic()
        with lock:
            handled[(record.topic, record.offset)] += 1
            if record.value.startswith(b"urgent:"):
                urgent_at[int(record.value[7:])] = now

    executor = ShareExecutor(_share_consumer(bootstrap_servers, topic, group, levels), handler,
                             shards=shards)
    thread = threading.Thread(target=executor.run, name="share-executor")
    thread.start()
    try:
        wait_until(lambda: len(handled) >= backlog // 20, 120, "5 % of the backlog")
        started = time.monotonic()
        producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 0})
        sent: dict[int, float] = {}
        target = f"{topic}-2" if side == "priority" else f"{topic}-0"
        for i in range(urgent):
            sent[i] = time.monotonic()
            producer.produce(target, f"urgent:{i}".encode())
            producer.poll(0)
            time.sleep(interval)
        producer.flush(30)
        wait_until(lambda: len(handled) == backlog + urgent, 600, "every record handled")
        drained = time.monotonic() - started
    finally:
        executor.stop()
        thread.join(120)
    latencies_ms = [(urgent_at[i] - sent[i]) * 1000 for i in range(urgent)]
    return {
        "urgent_p50_ms": percentile(latencies_ms, 50),
        "urgent_p99_ms": percentile(latencies_ms, 99),
        "urgent_max_ms": max(latencies_ms),
        "drain_s": drained,
        "handled": len(handled),
        "handled_twice": sum(count > 1 for count in handled.values()),
        **_run_figures(executor.stats()),
    }


def _member(servers: str, topic: str, group: str, shards: int, handler_s: float,
            count: Any, stop: Any, results: Any) -> None:
    """One member process: a ShareExecutor until ``stop`` is set; its figures to ``results``."""
    from priority_kafka.confluent import ShareExecutor

    def handler(record: Any) -> None:
        time.sleep(handler_s)  # the job waits on something else
        with count.get_lock():
            count.value += 1

    consumer = _share_consumer(servers, topic, group, LEVELS, SCALING_POLL_RECORDS)
    executor = ShareExecutor(consumer, handler, shards=shards)
    thread = threading.Thread(target=executor.run, name="share-executor")
    thread.start()
    stop.wait()
    executor.stop()
    thread.join(120)
    results.put(_run_figures(executor.stats()))


def scaling_side(
    bootstrap_servers: str, side: str, members: int, window: float, shards: int,
    handler_ms: float, backlog: int,
) -> dict[str, Any]:
    """Contender: ``members`` member processes of one share group per level; their rate."""
    from priority_kafka import create_priority_topics

    topic, group = unique("share-scale"), unique("share-scale")
    create_priority_topics(bootstrap_servers, topic, LEVELS)
    _preload_small_batches(bootstrap_servers, topic, backlog // LEVELS)
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    results = context.Queue()
    counts = [context.Value("q", 0) for _ in range(members)]
    processes = [
        context.Process(target=_member, name=f"member-{i}", args=(
            bootstrap_servers, topic, group, shards, handler_ms / 1000, counts[i], stop,
            results))
        for i in range(members)
    ]
    for process in processes:
        process.start()
    try:
        wait_until(lambda: all(count.value for count in counts), 120, "every member handling")
        before, start = sum(count.value for count in counts), time.monotonic()
        time.sleep(window)
        after, seconds = sum(count.value for count in counts), time.monotonic() - start
        per_member = [count.value for count in counts]
    finally:
        stop.set()
        figures = [results.get(timeout=180) for _ in processes]
        for process in processes:
            process.join(60)
    rate = (after - before) / seconds
    if after >= backlog:
        raise RuntimeError(f"the backlog ran out during the window ({after} of {backlog})")
    return {
        "members": members,
        "records_per_s": rate,
        "ideal_records_per_s": members * shards / (handler_ms / 1000),
        "per_member_handled": per_member,
        "delivery_counts": _merge([f["delivery_counts"] for f in figures]),
        **{key: sum(f[key] for f in figures)
           for key in ("released", "released_unstarted", "lock_expired", "archived",
                       "ack_failures")},
    }


def _preload_small_batches(servers: str, topic: str, per_level: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5,
                         "batch.num.messages": SCALING_BATCH})
    for level in range(LEVELS):
        for _ in range(per_level):
            while True:
                try:
                    producer.produce(f"{topic}-{level}", b"x" * 100)
                    break
                except BufferError:
                    producer.poll(0.05)
    producer.flush(60)


def _merge(histograms: Sequence[dict[int, dict[int, int]]]) -> dict[int, dict[int, int]]:
    merged: dict[int, Counter[int]] = {}
    for histogram in histograms:
        for level, counts in histogram.items():
            merged.setdefault(level, Counter()).update(counts)
    return {level: dict(sorted(counts.items())) for level, counts in sorted(merged.items())}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    if args.smoke:
        args.rounds, args.backlog, args.urgent, args.interval = 1, 2000, 5, 0.01
        args.members, args.window, args.scaling_backlog = "1,2", 1.0, 3000
    member_counts = [int(m) for m in args.members.split(",")]
    with broker(args) as servers:
        latency = interleave_sides(
            latency_side, SIDES, args.rounds, bootstrap_servers=servers,
            backlog=args.backlog, urgent=args.urgent, interval=args.interval,
            shards=args.shards,
        )
        scaling = interleave([
            Contender(f"members-{m}", scaling_side, {
                "bootstrap_servers": servers, "side": f"members-{m}", "members": m,
                "window": args.window, "shards": args.shards, "handler_ms": args.handler_ms,
                "backlog": args.scaling_backlog,
            })
            for m in member_counts
        ], args.rounds)
    one = f"members-{member_counts[0]}"
    result = {
        "smoke": args.smoke,
        "scenario": {
            "backlog": args.backlog, "urgent": args.urgent, "interval_s": args.interval,
            "shards": args.shards, "max_poll_records": MAX_POLL_RECORDS, "levels": LEVELS,
            "partitions_per_level": 1, "members": member_counts, "window_s": args.window,
            "scaling_max_poll_records": SCALING_POLL_RECORDS,
            "scaling_producer_batch": SCALING_BATCH,
            "handler_ms": args.handler_ms, "scaling_backlog": args.scaling_backlog,
        },
        "latency": {
            **{key: latency.compare(key, "priority", "fifo")
               for key in ("urgent_p99_ms", "urgent_p50_ms", "urgent_max_ms", "drain_s")},
            "per_round": {side: latency.results[side] for side in SIDES},
            "interleaving": latency.summary(),
        },
        "scaling": {
            "records_per_s": {
                name: scaling.values(name, "records_per_s") for name in scaling.results
            },
            "speedup_over_one_member": {
                name: scaling.compare("records_per_s", name, one) for name in scaling.results
            },
            "median_records_per_s": {
                name: statistics.median(scaling.values(name, "records_per_s"))
                for name in scaling.results
            },
            "per_round": scaling.results,
            "interleaving": scaling.summary(),
        },
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
