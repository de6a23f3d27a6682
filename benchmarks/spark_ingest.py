"""Ingest priority topics into Parquet on Spark: the priority_kafka source vs Spark's own.

The same records (``--records`` of 100 B, spread evenly over the three priority topics of one
logical topic) are streamed into Parquet by a ``Trigger.AvailableNow`` query on ``local[2]``
by three contenders: Spark's ``format("kafka")`` (spark-sql-kafka-0-10, resolved by Maven into
the cache directory and passed with ``spark.jars``), and ``format("priority_kafka")`` with
``client`` ``kafka-python`` and ``confluent``. Every run is a fresh process with a fresh JVM
(``--smoke``: one process and JVM for all, as it checks the report, not the timing),
and the contenders take turns for ``--rounds`` rounds (A B C, C B A, A B C, ...; see
:func:`benchmarks._common.interleave`), each reading the same records from the start into its
own output. Timed from ``start()`` to the query's end (Spark's start-up excluded). Reported:
each run's records/s and Spark's breakdown of its time (``duration_ms``: the micro-batches'
``durationMs`` summed; what ``triggerExecution`` leaves of ``seconds`` is the stream's start),
the per-round ratios of each of ours to Spark's own and their medians, the load average before
every run. Target: ours (confluent) / Spark's own >= 1.0.
Without ``--max-offsets-per-trigger`` each source reads everything in one batch, which measures
reading and writing rather than per-batch overhead; with it (the same for all),
priority_kafka's exponential split gives the lowest level 1/7 of each batch until the burst
kicks in, so equal backlogs take it more batches. A last priority_kafka run, where levels
drain and a level starts again mid-stream, records every micro-batch's records per level
(plotted).

    python -m benchmarks.spark_ingest [--smoke] [--records N] [--rounds R]
        [--max-offsets-per-trigger M] [--bootstrap-servers HOST:PORT]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import (
    Contender,
    Interleaved,
    broker,
    interleave,
    new_figure,
    parse_args,
    preload,
    run_fresh,
    unique,
    write_result,
)
from priority_kafka.naming import priority_topics
from priority_kafka.producer import PriorityProducer, create_priority_topics
from priority_kafka.testing import cache_root

NAME = "spark_ingest"
RECORD_BYTES = 100
POM = Path(__file__).resolve().parent / "spark-kafka-pom.xml"
# Maven Central has no spark-sql-kafka for every PySpark release: the installed version is
# tried first, then the newest connector known to resolve and run on PySpark 4.3 (its own
# token provider is missing there, the 4.0.0 one works with it).
FALLBACK_CONNECTOR = ("4.2.0", "4.0.0")
_BASELINE_ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2"
)
LEVELS = (2, 1, 0)
BASELINE = "spark_kafka"
SUBJECT = "priority_kafka_confluent"
#: Contender name -> the priority_kafka ``client`` option it reads with (None: Spark's own).
CONTENDERS: dict[str, str | None] = {
    BASELINE: None,
    "priority_kafka_kafka_python": "kafka-python",
    SUBJECT: "confluent",
}


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=None,
                        help="records to ingest (default 1,200,000; 3,000 with --smoke)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions per priority topic")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None,
                        help="micro-batch limit of both sources (default: none, one batch)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (smoke: 1)")


def spark_kafka_jars(pyspark_version: str) -> tuple[str, list[Path]]:
    """Resolve Spark's Kafka source with Maven; return its version and the jars to add.

    The jars land in ``<cache>/spark-sql-kafka-<version>`` and are reused from there.
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("'mvn' was not found on PATH; it resolves Spark's Kafka source.")
    failures = []
    for connector, token in ((pyspark_version, pyspark_version), FALLBACK_CONNECTOR):
        target = cache_root() / f"spark-sql-kafka-{connector}"
        if target.is_dir() and any(target.glob("spark-sql-kafka-*.jar")):
            return connector, sorted(target.glob("*.jar"))
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="spark-kafka-", dir=target.parent))
        done = subprocess.run(
            [mvn, "--batch-mode", "--quiet", "-f", str(POM),
             f"-Dspark.kafka.version={connector}", f"-Dspark.token.version={token}",
             "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
             "-DincludeScope=runtime", f"-DincludeArtifactIds={_BASELINE_ARTIFACTS}",
             f"-DoutputDirectory={staging}"],
            capture_output=True, text=True, check=False,
        )
        if done.returncode == 0:
            staging.rename(target)
            return connector, sorted(target.glob("*.jar"))
        shutil.rmtree(staging, ignore_errors=True)
        failures.append(f"{connector}: " + (done.stdout + done.stderr).strip()[-400:])
    raise RuntimeError("Maven could not resolve spark-sql-kafka-0-10:\n" + "\n".join(failures))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _arguments)
    records = args.records or (3_000 if args.smoke else 1_200_000)
    rounds = 1 if args.smoke else args.rounds
    limit = args.max_offsets_per_trigger
    import pyspark

    connector, jars = spark_kafka_jars(pyspark.__version__)
    with (
        _worker_environment(), broker(args) as servers,
        tempfile.TemporaryDirectory(prefix="spark-ingest-") as work,
    ):
        name = unique("ingest")
        topics = create_priority_topics(servers, name, len(LEVELS), num_partitions=args.partitions)
        started = time.perf_counter()
        per_level = records // len(LEVELS)
        records = per_level * len(LEVELS)
        preload(servers, topics, per_level, RECORD_BYTES)
        preload_s = time.perf_counter() - started
        spec = {"bootstrap_servers": servers, "topic": name, "records": records,
                "limit": limit, "smoke": args.smoke, "jars": [str(jar) for jar in jars],
                "work": work}
        if args.smoke:
            runs, levels = _smoke_runs(spec)
        else:
            runs = interleave(
                [Contender(contender, ingest, {"spec": spec, "contender": contender})
                 for contender in CONTENDERS],
                rounds, timeout_s=1800,
            )
            levels = run_fresh(Contender("levels", levels_run, {"spec": spec}), 1200)
    ratios = {
        f"{contender}/{BASELINE}": runs.compare("records_per_s", contender, BASELINE)
        for contender in CONTENDERS if contender != BASELINE
    }
    result = {
        "records": records,
        "record_bytes": RECORD_BYTES,
        "partitions_per_level": args.partitions,
        "max_offsets_per_trigger": limit,
        "spark_master": "local[2]",
        "connector": f"spark-sql-kafka-0-10_2.13:{connector}",
        "preload_seconds": round(preload_s, 2),
        "runs": runs.results,
        "records_per_s": {name: runs.values(name, "records_per_s") for name in CONTENDERS},
        "ratios": ratios,
        "ratio": ratios[f"{SUBJECT}/{BASELINE}"]["ratio"],
        "target_ratio": 1.0,
        "interleaving": {**runs.summary(), **(
            {"process_per_run": "one fresh process, one JVM, for every run (--smoke)"}
            if args.smoke else {}
        )},
        "levels_run": levels,
    }
    _plot(result["levels_run"], args.out)
    write_result(NAME, result, args.out)
    return result


@contextlib.contextmanager
def _worker_environment() -> Iterator[None]:
    """Make the spawned contenders, and the Python workers their JVMs start, import this
    checkout's priority_kafka with this interpreter; restore the environment afterwards."""
    saved = {name: os.environ.get(name) for name in ("PYSPARK_PYTHON", "PYTHONPATH")}
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, saved["PYTHONPATH"]]))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _spark(spec: dict[str, Any]) -> Any:
    """A fresh local[2] SparkSession with Spark's Kafka jars and our format registered."""
    from pyspark.sql import SparkSession

    from priority_kafka.spark import register

    spark = (
        SparkSession.builder.master("local[2]").appName(NAME)
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", ",".join(spec["jars"])).getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def ingest(spec: dict[str, Any], contender: str) -> dict[str, Any]:
    """Contender: stream every record into Parquet with Trigger.AvailableNow; time it, verify."""
    started = time.perf_counter()
    spark = _spark(spec)
    spark_start_s = time.perf_counter() - started
    work = Path(tempfile.mkdtemp(prefix=f"{contender}-", dir=spec["work"]))
    try:
        if contender == BASELINE:
            topics = priority_topics(spec["topic"], len(LEVELS))
            reader = spark.readStream.format("kafka").option("subscribe", ",".join(topics))
        else:
            reader = (
                spark.readStream.format("priority_kafka").option("subscribe", spec["topic"])
                .option("client", CONTENDERS[contender])
            )
        reader = reader.option("kafka.bootstrap.servers", spec["bootstrap_servers"])
        if spec["limit"] is not None:
            reader = reader.option("maxOffsetsPerTrigger", str(spec["limit"]))
        stream = reader.option("startingOffsets", "earliest").load()
        started = time.perf_counter()
        query = (
            stream.writeStream.format("parquet").option("path", str(work / "out"))
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True).start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - started
        read = [p for p in query.recentProgress if p["numInputRows"]]
        written = spark.read.parquet(str(work / "out")).count()
        if written != spec["records"]:
            raise RuntimeError(f"{contender} wrote {written} rows, expected {spec['records']}.")
        # Where a run's time went: Spark's own breakdown of each micro-batch, summed.
        phases: dict[str, int] = {}
        for progress in query.recentProgress:
            for phase, ms in progress.get("durationMs", {}).items():
                phases[phase] = phases.get(phase, 0) + ms
        return {"seconds": round(seconds, 2), "records_per_s": round(written / seconds),
                "batches": len(read), "spark_start_seconds": round(spark_start_s, 2),
                "duration_ms": phases}
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def _smoke_runs(spec: dict[str, Any]) -> tuple[Interleaved, dict[str, Any]]:
    """--smoke: every contender once and the levels run, in one fresh process. A smoke checks
    the report, not the timing, and a fresh JVM per run cost 10-20 s of Spark start-up each
    (the smoke took 135-148 s of a CI run with four of them)."""
    load = [round(x, 2) for x in os.getloadavg()]
    done = run_fresh(Contender("smoke", smoke_run, {"spec": spec}), 600)
    runs = Interleaved(
        [list(CONTENDERS)], {name: [done["runs"][name]] for name in CONTENDERS},
        {name: [load] for name in CONTENDERS},
    )
    return runs, done["levels"]


def smoke_run(spec: dict[str, Any]) -> dict[str, Any]:
    """Fresh process: :func:`ingest` for every contender, then :func:`levels_run`, one after
    the other on the same JVM (each stops its session; the next starts one on that JVM)."""
    runs = {contender: ingest(spec, contender) for contender in CONTENDERS}
    return {"runs": runs, "levels": levels_run(spec)}


def levels_run(spec: dict[str, Any]) -> dict[str, Any]:
    """Fresh process: :func:`_levels_run` on its own SparkSession."""
    spark = _spark(spec)
    try:
        return _levels_run(spark, spec)
    finally:
        spark.stop()


def _levels_run(spark: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Levels that drain and one that starts again: records per level of every micro-batch.

    In units of each level's reserved share of a batch: level 2 holds 2 at the start, level 1
    20 and level 0 26; after the tenth batch level 2 gets 4 more. (Smoke: 1, 2, 3; 1 more
    after the second batch.)
    """
    limit = 70 if spec["smoke"] else 7_000
    share = {level: limit * 2**level // 7 for level in LEVELS}  # the exponential split
    shares, later_shares, later_after = (
        ({2: 1, 1: 2, 0: 3}, {2: 1}, 2) if spec["smoke"] else ({2: 2, 1: 20, 0: 26}, {2: 4}, 10)
    )
    initial = {level: n * share[level] for level, n in shares.items()}
    later = {level: n * share[level] for level, n in later_shares.items()}
    total = sum(initial.values()) + sum(later.values())
    name = unique("levels")
    create_priority_topics(spec["bootstrap_servers"], name, len(LEVELS))
    _send(spec["bootstrap_servers"], name, initial)
    batches: list[dict[int, int]] = []

    def count_levels(frame: Any, batch_id: int) -> None:
        rows = frame.groupBy("priority").count().collect()
        counts = {row["priority"]: row["count"] for row in rows}
        if counts:
            batches.append({level: counts.get(level, 0) for level in LEVELS})
        if len(batches) == later_after and counts:
            _send(spec["bootstrap_servers"], name, later)

    query = (
        spark.readStream.format("priority_kafka")
        .option("kafka.bootstrap.servers", spec["bootstrap_servers"])
        .option("subscribe", name).option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(limit)).load()
        .writeStream.foreachBatch(count_levels).trigger(processingTime="0 seconds")
        .option("checkpointLocation", str(Path(spec["work"]) / "levels-checkpoint")).start()
    )
    started = time.monotonic()
    deadline = started + (240 if spec["smoke"] else 900)
    try:
        while sum(map(sum, (b.values() for b in batches))) < total:
            if time.monotonic() > deadline or query.exception() is not None:
                raise RuntimeError(f"the levels run stalled: {batches} {query.exception()}")
            time.sleep(0.2)
    finally:
        query.stop()
    return {"seconds": round(time.monotonic() - started, 2),
            "max_offsets_per_trigger": limit, "initial": initial, "added": later,
            "added_after_batch": later_after,
            "batches": [{str(level): count for level, count in b.items()} for b in batches]}


def _send(bootstrap_servers: str, name: str, counts: dict[int, int]) -> None:
    payload = b"x" * RECORD_BYTES
    with PriorityProducer(max_priority=len(LEVELS), bootstrap_servers=bootstrap_servers,
                          linger_ms=20) as producer:
        for level, count in counts.items():
            for _ in range(count):
                producer.send(name, value=payload, priority=level)
        producer.flush()


def _plot(levels_run: dict[str, Any], out: Path) -> None:
    """Stacked bars: records per level in each micro-batch of the levels run."""
    figure, axes = new_figure(figsize=(9, 4.5))
    batches = levels_run["batches"]
    bottom = [0] * len(batches)
    for level, colour in zip(LEVELS, ("tab:red", "tab:orange", "tab:blue"), strict=True):
        heights = [b[str(level)] for b in batches]
        axes.bar(range(len(batches)), heights, bottom=bottom, color=colour,
                 label=f"priority {level}")
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axes.axhline(levels_run["max_offsets_per_trigger"], color="black", linestyle="--",
                 linewidth=1, label="maxOffsetsPerTrigger")
    axes.axvline(levels_run["added_after_batch"] - 0.5, color="grey", linestyle=":", linewidth=1,
                 label="level 2 gets new records")
    axes.set_ylim(0, levels_run["max_offsets_per_trigger"] * 1.4)  # room for the legend
    axes.set_xlabel("micro-batch")
    axes.set_ylabel("records admitted")
    axes.set_title("priority_kafka admission per micro-batch (exponential split, capacity burst)")
    axes.legend(loc="upper right", fontsize=8)
    out.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(out / f"{NAME}_levels.png", dpi=110)


if __name__ == "__main__":
    main()
