"""Stream priority topics into Parquet with Spark, partitioned by priority; restartable.

``orders`` with three priority levels is the Kafka topics ``orders-0`` .. ``orders-2``. The
query reads them with the ``priority_kafka`` source (at most ``--max-offsets-per-trigger``
records per micro-batch, split 4:2:1 from the highest level down, with capacity burst) and
appends them to ``<out>/parquet/priority=<level>/``. Its offsets live in ``<out>/checkpoint``:
stop it at any point and run the same command again, and it goes on where it stopped, writing
every record once.

Against your broker (``--available-now`` drains what is there and exits; without it the query
runs until Ctrl-C)::

    python examples/spark_ingest.py --bootstrap-servers HOST:PORT --topic orders --out /data/orders

Without ``--bootstrap-servers`` it starts a local Apache Kafka broker, fills ``orders`` with
sample records, ingests them, adds more, and restarts the query from its checkpoint to show
that the second run picks up exactly the new records.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from priority_kafka import PriorityProducer, create_priority_topics
from priority_kafka.testing import local_kafka

MAX_PRIORITY = 3


def start_query(spark: Any, args: argparse.Namespace, available_now: bool) -> Any:
    """Start the ingestion query: priority topics -> Parquet partitioned by priority."""
    stream = (
        spark.readStream.format("priority_kafka")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("subscribe", args.topic)
        .option("maxPriority", MAX_PRIORITY)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
        .load()
    )
    writer = (
        stream.writeStream.format("parquet").partitionBy("priority")
        .option("path", str(args.out / "parquet"))
        .option("checkpointLocation", str(args.out / "checkpoint"))
    )
    trigger = {"availableNow": True} if available_now else {"processingTime": "1 second"}
    return writer.trigger(**trigger).start()


def report(query: Any) -> None:
    """Print each micro-batch's size as the query reports it."""
    for progress in query.recentProgress:
        if progress["numInputRows"]:
            print(f"  batch {progress['batchId']}: {progress['numInputRows']} records", flush=True)


def written_per_priority(spark: Any, args: argparse.Namespace) -> dict[int, int]:
    """Rows in the Parquet output, per priority."""
    frame = spark.read.parquet(str(args.out / "parquet"))
    return {row["priority"]: row["count"] for row in frame.groupBy("priority").count().collect()}


def produce(bootstrap_servers: str, topic: str, per_level: int, first: int) -> None:
    with PriorityProducer(max_priority=MAX_PRIORITY, bootstrap_servers=bootstrap_servers) as out:
        for level in range(MAX_PRIORITY):
            for i in range(first, first + per_level):
                out.send(topic, f"order {i} at priority {level}".encode(),
                         key=f"customer-{i % 50}".encode(), priority=level)
        out.flush()


def ingest(spark: Any, args: argparse.Namespace) -> None:
    """Run the query on the given broker until drained (--available-now) or Ctrl-C."""
    query = start_query(spark, args, available_now=args.available_now)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        print("stopping; the next run resumes from the checkpoint", flush=True)
    finally:
        query.stop()
        report(query)
    print("rows per priority:", written_per_priority(spark, args), flush=True)


def demo(spark: Any, args: argparse.Namespace) -> None:
    """Local broker: ingest sample records, add more, restart from the checkpoint."""
    print("starting a local Apache Kafka broker ...", flush=True)
    with local_kafka() as broker:
        args.bootstrap_servers = broker.bootstrap_servers
        create_priority_topics(broker.bootstrap_servers, args.topic, MAX_PRIORITY,
                               num_partitions=2)
        produce(broker.bootstrap_servers, args.topic, per_level=2_000, first=0)
        for run, per_level in ((1, 1_000), (2, 0)):
            print(f"run {run}: ingesting what is available ...", flush=True)
            query = start_query(spark, args, available_now=True)
            query.awaitTermination()
            report(query)
            print(f"  rows per priority so far: {written_per_priority(spark, args)}", flush=True)
            if per_level:
                print(f"adding {per_level} more records per level; restarting", flush=True)
                produce(broker.bootstrap_servers, args.topic, per_level=per_level, first=2_000)
        rows = spark.read.parquet(str(args.out / "parquet"))
        distinct = rows.select("topic", "partition", "offset").distinct().count()
        print(f"{rows.count()} rows, {distinct} distinct records: each written once", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="your broker (default: start a local one)")
    parser.add_argument("--topic", default="orders", help="the logical topic (default orders)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output and checkpoint directory (default: a temporary one)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=1_400)
    parser.add_argument("--available-now", action="store_true",
                        help="drain what is available, then exit")
    args = parser.parse_args()
    # The data source runs in Spark's Python workers: they must use this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from priority_kafka.spark import register

    spark = (
        SparkSession.builder.master("local[2]").appName("priority-kafka-ingest")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="spark-ingest-") as scratch:
            args.out = args.out or Path(scratch)
            print(f"output: {args.out / 'parquet'}, checkpoint: {args.out / 'checkpoint'}")
            if args.bootstrap_servers:
                ingest(spark, args)
            else:
                demo(spark, args)
    finally:
        spark.stop()
    print(f"done in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
