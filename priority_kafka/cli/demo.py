"""``priority-kafka demo``: urgent records overtake a backlog, live, on a real broker.

A backlog of low-priority work (level 0, plus some at level 1) sits in a 3-level topic when
bursts of urgent records (level 2) start arriving, with a steady trickle at level 1. A
:class:`~priority_kafka.PriorityConsumer` feeds a :class:`~priority_kafka.ShardedExecutor`
(8 workers, per-key order, a 10 ms I/O-like handler: about 800 records/s at most). The live
view shows per level what is handled per second, the reserved quota and the last poll's quota
(a burst borrows unused capacity), lag and latency (record timestamp to handler end). At the
end: a summary table, ``demo.json`` and ``demo.png`` (per-level throughput and latency over time).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from priority_kafka.cli._common import (
    add_bootstrap,
    add_json,
    bootstrap,
    emit_json,
    example,
    note,
    output_directory,
    plain,
    positive,
    unique,
)
from priority_kafka.cli._view import Progress
from priority_kafka.cli.consume import observed

MAX_PRIORITY = 3
PARTITIONS = 3
SHARDS = 8
WORK_S = 0.010
KEYS = 200
#: Backlog records per second of --duration, per level (level 0 outlasts the run).
BACKLOG_PER_S = {0: 600, 1: 60}
TRICKLE_PER_S = 40  # level 1, while the demo runs
BURST_RECORDS = 200  # level 2, each burst
BURST_RATE = 500.0  # records/s within a burst


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "demo", help="urgent records overtake a backlog: live view, summary and chart",
        description=plain(__doc__), epilog=example(
            "priority-kafka demo                      # local broker, about a minute",
            "priority-kafka demo --duration 20 --out /tmp/demo --metrics-port 9400",
        ),
    )
    add_bootstrap(parser, local=True)
    parser.add_argument("--duration", type=positive(float, 3), default=45.0,
                        help="seconds of live traffic after the backlog is loaded (default 45)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (keys, burst sizes)")
    parser.add_argument("--out", type=Path, default=Path("priority-kafka-demo"),
                        help="where demo.json and demo.png go (default ./priority-kafka-demo)")
    parser.add_argument("--metrics-port", type=positive(int, 0), default=None,
                        help="serve Prometheus metrics on 127.0.0.1:PORT/metrics")
    parser.add_argument("--spark", action="store_true",
                        help="afterwards, stream the topics into Parquet with the Spark source "
                        "(extra [spark])")
    parser.add_argument("--quiet", "-q", action="store_true", help="no live view")
    add_json(parser)
    parser.set_defaults(run=run)


class Timeline:
    """Handled records, thread-safe: per level, (end time since start, latency seconds)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.records: dict[int, list[tuple[float, float]]] = collections.defaultdict(list)
        self._lock = threading.Lock()

    def add(self, level: int, latency_s: float) -> None:
        with self._lock:
            self.records[level].append((time.monotonic() - self.started, latency_s))

    def per_second(self) -> dict[int, list[dict[str, Any]]]:
        """Per level and 1-second bin: records handled, p50 and p99 latency (ms)."""
        with self._lock:
            records = {level: list(values) for level, values in self.records.items()}
        last = max((int(at) for values in records.values() for at, _ in values), default=-1)
        result = {}
        for level, values in sorted(records.items(), reverse=True):
            bins: dict[int, list[float]] = collections.defaultdict(list)
            for at, latency in values:
                bins[int(at)].append(latency)
            result[level] = [
                {"second": second, "records": len(bins[second]),
                 "p50_ms": _pct(bins[second], 50) if bins[second] else None,
                 "p99_ms": _pct(bins[second], 99) if bins[second] else None}
                for second in range(last + 1)
            ]
        return result


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] * 1000, 1)


def _send_live(producer: Any, topic: str, duration_s: float, seed: int,
               stop: threading.Event, sent: collections.Counter[int],
               bursts: list[float], started: float) -> None:
    """Level 1 at a steady trickle, level 2 in bursts every ~duration/5 seconds."""
    chooser = random.Random(seed)
    period = max(3.0, duration_s / 5)
    next_burst = time.monotonic() + min(2.0, period / 2)
    next_trickle = time.monotonic()
    deadline = time.monotonic() + duration_s
    while not stop.is_set() and time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_burst:
            bursts.append(now - started)
            size = int(BURST_RECORDS * chooser.uniform(0.75, 1.25))
            for i in range(size):
                key = f"customer-{chooser.randrange(KEYS)}".encode()
                producer.send(topic, b"urgent", key=key, priority=2)
                sent[2] += 1
                if i % 10 == 9:
                    producer.flush()
                    time.sleep(10 / BURST_RATE)
            producer.flush()
            next_burst += period
        while next_trickle <= time.monotonic():
            key = f"customer-{chooser.randrange(KEYS)}".encode()
            producer.send(topic, b"steady", key=key, priority=1)
            sent[1] += 1
            next_trickle += 1 / TRICKLE_PER_S
        producer.flush()
        stop.wait(0.02)


def _plot(per_second: dict[int, list[dict[str, Any]]], bursts: list[float],
          path: Path) -> bool:
    try:
        import matplotlib
    except ImportError:
        note("chart skipped: matplotlib is not installed (pip install 'priority-kafka[cli]')")
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    colours = {2: "tab:red", 1: "tab:orange", 0: "tab:blue"}
    for level, bins in per_second.items():
        seconds = [b["second"] for b in bins]
        top.plot(seconds, [b["records"] for b in bins], label=f"level {level}",
                 color=colours.get(level))
        # Seconds without records have no latency: NaN leaves a gap instead of a false line.
        for key, style in (("p50_ms", "-"), ("p99_ms", ":")):
            bottom.plot(seconds, [math.nan if b[key] is None else b[key] for b in bins],
                        color=colours.get(level), linestyle=style, marker=".",
                        label=f"level {level} {key[:3]}")
    for at in bursts:
        for axis in (top, bottom):
            axis.axvline(at, color="grey", alpha=0.3)
    top.set_ylabel("records handled per second")
    top.set_title("priority-kafka demo: urgent bursts (grey lines) over a level-0 backlog")
    top.legend()
    bottom.set_yscale("log")
    bottom.set_ylabel("latency, timestamp to handled (ms)")
    bottom.set_xlabel("seconds since the consumer started")
    bottom.legend(fontsize="small", ncol=3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


def _spark_ingest(servers: str, topic: str, out: Path) -> dict[int, int]:
    """Stream the three levels into Parquet (available-now) and count rows per priority."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        from priority_kafka.cli._common import CliError

        raise CliError("--spark needs PySpark: pip install 'priority-kafka[spark]'") from None
    from priority_kafka.spark import register

    note("streaming the topics into Parquet with Spark ...")
    spark = (
        SparkSession.builder.master("local[2]").appName("priority-kafka-demo")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )
    try:
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        query = (
            spark.readStream.format("priority_kafka")
            .option("kafka.bootstrap.servers", servers).option("subscribe", topic)
            .option("maxPriority", MAX_PRIORITY).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 20_000).load()
            .writeStream.format("parquet").partitionBy("priority")
            .option("path", str(out / "parquet"))
            .option("checkpointLocation", str(out / "checkpoint"))
            .trigger(availableNow=True).start()
        )
        query.awaitTermination()
        frame = spark.read.parquet(str(out / "parquet"))
        return {row["priority"]: row["count"]
                for row in frame.groupBy("priority").count().collect()}
    finally:
        spark.stop()


def run(args: argparse.Namespace) -> int:
    from priority_kafka import (
        PriorityConsumer,
        PriorityProducer,
        ShardedExecutor,
        create_priority_topics,
    )
    from priority_kafka.metrics import LagReader, Metrics, executor_stats

    wall = time.monotonic()
    output_directory(args.out)
    with bootstrap(args.bootstrap_servers) as servers:
        topic, group = unique("demo"), unique("demo-group")
        create_priority_topics(servers, topic, MAX_PRIORITY, num_partitions=PARTITIONS)
        producer = PriorityProducer(bootstrap_servers=servers, max_priority=MAX_PRIORITY,
                                    linger_ms=5)
        chooser = random.Random(args.seed)
        sent: collections.Counter[int] = collections.Counter()
        backlog = {level: int(rate * args.duration) for level, rate in BACKLOG_PER_S.items()}
        with Progress("loading the backlog", sum(backlog.values())) as progress:
            for level, count in backlog.items():
                for i in range(count):
                    key = f"customer-{chooser.randrange(KEYS)}".encode()
                    producer.send(topic, b"backlog", key=key, priority=level)
                    if i % 500 == 499:
                        progress.advance(500)
                sent[level] += count
            producer.flush()
        note(f"backlog of {dict(backlog)} records in {topic}-0/-1; the consumer starts")

        timeline = Timeline()

        def handle(record: Any) -> None:
            time.sleep(WORK_S)
            timeline.add(int(record.topic.rsplit("-", 1)[1]),
                         time.time() - record.timestamp / 1000)

        consumer = PriorityConsumer(
            bootstrap_servers=servers, group_id=group, max_priority=MAX_PRIORITY,
            max_poll_records=200, auto_offset_reset="earliest", enable_auto_commit=False,
        )
        metrics = Metrics(consumer, lag=LagReader(servers, topic, group, MAX_PRIORITY))
        executor = ShardedExecutor(consumer, metrics.timed(handle), shards=SHARDS,
                                   ordering="key", max_in_flight_per_partition=200)
        metrics.executor = executor
        executor.subscribe([topic])
        stop = threading.Event()
        bursts: list[float] = []
        live = threading.Thread(
            target=_send_live,
            args=(producer, topic, args.duration, args.seed, stop, sent, bursts,
                  timeline.started),
            daemon=True,
        )

        def stop_later() -> None:
            # Live traffic starts once the consumer handles records, and runs --duration.
            while not timeline.records and not stop.is_set():
                stop.wait(0.05)
            live.start()
            stop.wait(args.duration)
            stop.set()
            live.join()
            # What was sent live is handled before stopping (the backlog may remain).
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and any(
                len(timeline.records.get(level, [])) < sent[level] for level in (1, 2)
            ):
                time.sleep(0.05)
            executor.stop()

        timer = threading.Thread(target=stop_later, daemon=True)
        timer.start()
        failure: BaseException | None = None
        try:
            with observed(metrics, args.metrics_port, f"demo {topic}", args.quiet or args.json,
                          sys.stderr if args.json else None):
                executor.run()  # the main thread: Ctrl-C and SIGTERM stop it gracefully
        except BaseException as exc:  # reported after the clean-up below
            failure = exc
        finally:
            stop.set()
            if live.is_alive():
                live.join()
            timer.join()
            producer.close()
        if failure is not None:
            raise failure
        elapsed = time.monotonic() - timeline.started
        reader = LagReader(servers, topic, group, MAX_PRIORITY)
        try:
            lag = collections.Counter[int]()
            for values in reader.read().values():
                lag[values["level"]] += values["lag"]
        finally:
            reader.close()
        stats = executor_stats(executor.stats())
        spark_rows = _spark_ingest(servers, topic, args.out / "spark") if args.spark else None

    per_second = timeline.per_second()
    levels = {}
    for level in sorted(sent, reverse=True):
        latencies = [latency for _, latency in timeline.records.get(level, [])]
        levels[level] = {
            "sent": sent[level], "handled": len(latencies),
            "records_per_s": round(len(latencies) / elapsed, 1),
            "p50_ms": _pct(latencies, 50) if latencies else None,
            "p99_ms": _pct(latencies, 99) if latencies else None,
            "lag_at_end": lag[level],
        }
    chart = args.out / "demo.png"
    charted = _plot(per_second, bursts, chart)
    result = {
        "topic": topic, "seconds": round(elapsed, 1), "shards": SHARDS,
        "handler_ms": WORK_S * 1000, "levels": levels, "bursts_at_s": [round(b, 1) for b in bursts],
        "executor": stats, "per_second": per_second,
        "chart": str(chart) if charted else None, "wall_s": round(time.monotonic() - wall, 1),
    }
    if spark_rows is not None:
        result["spark_rows_per_priority"] = spark_rows
    (args.out / "demo.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        emit_json({k: v for k, v in result.items() if k != "per_second"})
        return 0
    print(f"\n{elapsed:.0f} s of traffic, {SHARDS} workers, {WORK_S * 1000:.0f} ms per record; "
          f"{stats['handled']} handled, {stats['commits']} commits")
    print(f"{'level':>5} {'sent':>8} {'handled':>8} {'rec/s':>7} {'p50 ms':>9} {'p99 ms':>9} "
          f"{'lag':>7}   (latency: timestamp to handled)")
    for level, row in levels.items():
        print(f"{level:>5} {row['sent']:>8} {row['handled']:>8} {row['records_per_s']:>7.0f} "
              f"{row['p50_ms'] or 0:>9.0f} {row['p99_ms'] or 0:>9.0f} {row['lag_at_end']:>7}")
    if spark_rows is not None:
        print(f"Spark wrote Parquet rows per priority: {dict(sorted(spark_rows.items()))} "
              f"to {args.out / 'spark' / 'parquet'}")
    print(f"chart: {chart if charted else '(skipped)'}; numbers: {args.out / 'demo.json'}")
    return 0
