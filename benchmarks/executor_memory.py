"""The executor's memory: the RSS of its process over a big backlog, sampled from outside.

A logical topic of 3 levels of ``--partitions`` partitions (4) holds a backlog of ``--records``
records (1,000,000) of 100 B over 1,000 keys, preloaded once. Each run is a fresh process: a
``ShardedExecutor`` on the priority consumer of the chosen client family, ``--shards`` workers
(16), a handler sleeping ``--handler-ms`` (1 ms), ``"key"`` order, a fresh consumer group read
from the start; the backlog never drains within a run, so every buffer is as full as it gets.
The parent samples the child's resident set size (``psutil``, every 100 ms, and the kernel's
high-water mark ``VmHWM``) from the moment it starts until it ends.

Reported per run: the peak RSS (the high-water mark over the whole process life: imports, the
group join, the run, the stop), the steady RSS (the median of the samples in the second half
of the measured window), the records/s handled over the window (``--seconds`` from the first
handled record), and what was buffered at the window's end as the process sees it: records
in the executor (received and not committed, queued), in the priority consumer's prefetch
buffers, the raw bytes of the kafka-python fetcher's completed fetches, or librdkafka's fetch
queues (its statistics, ``fetchq_size``). ``--trace`` adds the top allocation sites of a
``tracemalloc`` snapshot at the window's end (it slows the run: its rates mean nothing).

Contenders are *sides* (settings, see :data:`SIDES`) on each client, interleaved in fresh
processes (the load average before every run is under ``interleaving``); the ratios are of
each side to ``default`` in the same round. RSS is in MB of 10^6 bytes, against
:data:`LIMIT_MB` (issue 22). ``executor_memory.png`` plots every run's RSS over time.

    .venv/bin/python -m benchmarks.executor_memory [--smoke] [--records N] [--seconds S]
        [--rounds R] [--client kafka-python|confluent|both] [--sides default previous ...]
        [--trace]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from benchmarks._clients import add_client_argument, clients_of, per_client
from benchmarks._code import family
from benchmarks._common import (
    broker,
    interleave,
    new_figure,
    parse_args,
    preload,
    ratio_summary,
    save_figure,
    write_result,
)
from benchmarks._consumers import MAX_PRIORITY
from benchmarks._executor import executor_consumer
from benchmarks._running import Running
from priority_kafka.executor import ShardedExecutor

NAME = "executor_memory"
KEYS = 1000
#: Most RSS the executor's process may reach over the backlog (issue 22), in MB of 10^6 bytes.
LIMIT_MB = 150
MB = 1_000_000
#: Most records a loop run reads (and at most 90 % of the backlog, which must outlast it).
LOOP_RECORDS = 600_000
#: How often the parent samples the child's RSS.
_SAMPLE_S = 0.1
#: How often the child reads its own gauges.
_GAUGE_S = 0.5

#: A side: from a client's Family, the consumer's settings and the executor's options.
Side = Callable[[Any], tuple[dict[str, Any], dict[str, Any]]]


def _previous(one: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the library did before the byte bounds, on ``one`` (its Family)."""
    if one.librdkafka:
        return (
            {"queued.max.messages.kbytes": 65_536 // MAX_PRIORITY, "fetch.max.bytes": 50 << 20},
            {"max_in_flight_bytes": 1 << 40, "park_bytes": 12 << 20},
        )
    return (
        {"max_partition_fetch_bytes": 3 << 20, "fetch_buffer_bytes": 1 << 40},
        {"max_in_flight_bytes": 1 << 40},
    )


def _fetch_buffer(size: int) -> Side:
    """``fetch_buffer_bytes`` of ``size`` MiB, in the family's spelling."""
    return lambda one: ({one.key("fetch.buffer.bytes"): size << 20}, {})


#: The sides (``park_bytes``: the confluent adapter's option). ``default`` is what the library
#: does unless told; ``previous`` what it did before the byte bounds (3 MiB per partition and
#: level and a prefetch bounded in records only on kafka-python; 64 MiB of librdkafka queue
#: over the levels, 50 MiB fetches and 1 MiB parked per paused partition on confluent; no
#: bound in bytes in the executor); ``fetch-<n>m`` sets ``fetch_buffer_bytes``.
SIDES: dict[str, Side] = {
    "default": lambda one: ({}, {}),
    "previous": _previous,
    **{f"fetch-{size}m": _fetch_buffer(size) for size in (4, 8, 12, 16, 24, 32, 64)},
}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=1_000_000, help="backlog, all levels")
    parser.add_argument("--partitions", type=int, default=4, help="partitions per level")
    parser.add_argument("--seconds", type=float, default=40.0, help="measured window per run")
    parser.add_argument("--rounds", type=int, default=2, help="runs per contender")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--handler-ms", type=float, default=1.0)
    parser.add_argument(
        "--sides", nargs="+", choices=sorted(SIDES), default=["default", "previous"]
    )
    parser.add_argument(
        "--trace", action="store_true", help="tracemalloc's top allocation sites (slow)"
    )
    parser.add_argument(
        "--loop", action="store_true",
        help="also the consumer alone (poll and drop) per side: the fetch settings' throughput",
    )
    parser.add_argument(
        "--topic", help="a logical topic already holding the backlog (with --bootstrap-servers): "
        "no preload",
    )
    add_client_argument(parser)


# -- the child: one executor run ------------------------------------------------------------


class _FetchQueues:
    """librdkafka's fetch queues (records, bytes) per level, from its statistics callback."""

    def __init__(self) -> None:
        self.per_level: dict[str, tuple[int, int]] = {}

    def stats(self, document: str) -> None:
        """librdkafka's statistics callback (every level's, each by its client name)."""
        parsed = json.loads(document)
        records = size = 0
        for topic in parsed.get("topics", {}).values():
            for partition in topic.get("partitions", {}).values():
                records += max(0, partition.get("fetchq_cnt", 0))
                size += max(0, partition.get("fetchq_size", 0))
        self.per_level[parsed.get("name", "")] = (records, size)


def _buffered(executor: ShardedExecutor, queues: _FetchQueues | None) -> dict[str, int]:
    """What the process holds of the backlog now, as far as Python sees it."""
    stats = executor.stats()
    found = {"executor_in_flight": stats.in_flight, "executor_queued": stats.queued}
    client = executor._consumer
    consumer = getattr(client, "consumer", None)
    levels = getattr(consumer, "_levels", None)
    if queues is not None:  # confluent
        found["librdkafka_fetchq_records"] = sum(r for r, _ in queues.per_level.values())
        found["librdkafka_fetchq_bytes"] = sum(b for _, b in queues.per_level.values())
        parked = getattr(client, "parked", None)
        found["parked_records"] = parked() if callable(parked) else 0
    elif isinstance(levels, dict):  # a kafka-python PriorityConsumer
        found["prefetched_records"] = sum(len(level.buffer) for level in levels.values())
        raw = 0
        for level in levels.values():
            fetcher = level.consumer._fetcher
            pending = [*list(fetcher._completed_fetches),
                       *list(fetcher._paused_completed_fetches.values())]
            raw += sum(len(fetch.partition_data.records or b"") for fetch in pending)
        found["fetcher_completed_bytes"] = raw
    return found


def _allocation_sites(snapshot: tracemalloc.Snapshot, top: int = 15) -> dict[str, Any]:
    stats = snapshot.statistics("lineno")
    return {
        "traced_mb": sum(stat.size for stat in stats) / MB,
        "top": [
            {"site": str(stat.traceback), "mb": stat.size / MB, "blocks": stat.count}
            for stat in stats[:top]
        ],
    }


def _loop(consumer: Any, seconds: float, most: int) -> dict[str, Any]:
    """The consumer alone: poll and drop for ``seconds`` from the first records (at most
    ``most`` records; the first poll's, which came with the join, not counted)."""
    started = time.monotonic()
    first: float | None = None
    seen = 0
    try:
        while True:
            got = sum(map(len, consumer.poll(timeout_ms=100).values()))
            now = time.monotonic()
            if first is None:
                if got:
                    first = now
                elif now > started + 120:
                    raise TimeoutError("no records in 120 s")
                continue
            seen += got
            if now >= first + seconds or seen >= most:
                break
    finally:
        consumer.close()
    return {"started": started, "first": first, "end": now, "handled": seen,
            "records_per_s": seen / (now - first), "buffered_at_end": {}}


def contender(
    client: str, side: str, servers: str, topic: str, seconds: float, shards: int,
    handler_ms: float, trace: bool, kind: str = "executor", most: int = LOOP_RECORDS,
) -> dict[str, Any]:
    """One run in a fresh process: the executor over the backlog for ``seconds`` from its first
    handled record (``kind`` "loop": the consumer alone, polling and dropping); times are
    ``time.monotonic()`` (one clock for parent and child)."""
    if kind == "loop":
        overrides = SIDES[side](family(client))[0]
        consumer = executor_consumer(client, servers, [topic], levels=True, overrides=overrides)
        return _loop(consumer, seconds, most)
    if trace:
        tracemalloc.start()
    overrides, options = SIDES[side](family(client))
    overrides, options = dict(overrides), dict(options)
    park_bytes = options.pop("park_bytes", None)
    queues = None
    if family(client).librdkafka:
        queues = _FetchQueues()
        overrides["statistics.interval.ms"] = 1000
        overrides["stats_cb"] = queues.stats
    delay = handler_ms / 1000

    def handler(record: Any) -> None:
        time.sleep(delay)

    consumer = executor_consumer(client, servers, [topic], levels=True, overrides=overrides)
    if park_bytes is not None:
        consumer._park_bytes = park_bytes  # the adapter's setting, for "previous"
    executor = ShardedExecutor(consumer, handler, shards=shards, ordering="key", **options)
    started = time.monotonic()
    running = Running(executor)
    gauges: list[dict[str, Any]] = []
    try:
        deadline = started + 120
        while not executor.stats().handled:
            if running.error is not None:
                raise running.error
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing handled in 120 s ({executor.stats()})")
            time.sleep(0.01)
        first, handled_at_first = time.monotonic(), executor.stats().handled
        end = first + seconds
        while (now := time.monotonic()) < end and running.error is None:
            gauges.append({"t": now, **_buffered(executor, queues)})
            time.sleep(min(_GAUGE_S, max(0.0, end - now)))
        if running.error is not None:
            raise running.error
        last, handled = time.monotonic(), executor.stats().handled
        sites = _allocation_sites(tracemalloc.take_snapshot()) if trace else None
    finally:
        running.stop()
    return {
        "started": started, "first": first, "end": last,
        "handled": handled - handled_at_first,
        "records_per_s": (handled - handled_at_first) / (last - first),
        "buffered_at_end": gauges[-1] if gauges else {},
        "gauges": gauges,
        # A confluent process should not carry kafka-python (13 MB): say whether it did.
        "kafka_python_loaded": "kafka" in sys.modules,
        **({"tracemalloc": sites} if sites is not None else {}),
    }


# -- the parent: RSS from outside -----------------------------------------------------------


def _high_water_mark(pid: int) -> int | None:
    """The kernel's peak RSS of ``pid`` (``VmHWM``), in bytes; None where there is none."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def watch_rss(pid: int) -> Callable[[], dict[str, Any]]:
    """Sample the RSS of process ``pid`` every ``_SAMPLE_S`` on a thread, until it ends; the
    returned function stops it and gives the samples ``[[monotonic, bytes], ...]`` and the
    high-water mark last read (or the largest sample)."""
    process = psutil.Process(pid)
    samples: list[list[float]] = []
    peak = [0]
    stopping = threading.Event()

    def sample() -> None:
        while not stopping.is_set():
            try:
                rss = process.memory_info().rss
                mark = _high_water_mark(pid)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                return
            samples.append([round(time.monotonic(), 3), rss])
            peak[0] = max(peak[0], rss, mark or 0)
            stopping.wait(_SAMPLE_S)

    thread = threading.Thread(target=sample, name=f"rss-{pid}", daemon=True)
    thread.start()

    def stop() -> dict[str, Any]:
        stopping.set()
        thread.join()
        return {"rss_samples": samples, "peak_rss": peak[0]}

    return stop


def rss_figures(run: Mapping[str, Any]) -> dict[str, float]:
    """A run's peak RSS and its steady RSS (the median over the window's second half), in MB."""
    middle = (run["first"] + run["end"]) / 2
    steady = [rss for t, rss in run["rss_samples"] if middle <= t <= run["end"]]
    if not steady:  # a window shorter than a sample interval (smoke runs)
        steady = [rss for _, rss in run["rss_samples"]]
    return {
        "peak_rss_mb": run["peak_rss"] / MB,
        "steady_rss_mb": statistics.median(steady) / MB,
    }


def _name(side: str, kind: str) -> str:
    """A contender's name without its client: the side, and ``/loop`` for the consumer alone."""
    return side if kind == "executor" else f"{side}/{kind}"


def rss_series(run: Mapping[str, Any]) -> list[float]:
    """The run's RSS (MB) at each whole second from its first handled record on."""
    series: list[float] = []
    for t, rss in run["rss_samples"]:
        if t >= run["first"] + len(series):
            series.append(round(rss / MB, 1))
    return series


def _preload_backlog(servers: str, topic: str, records: int, partitions: int) -> int:
    from priority_kafka import create_priority_topics  # kafka-python: see benchmarks._common

    names = create_priority_topics(servers, topic, MAX_PRIORITY, num_partitions=partitions)
    per_level = records // MAX_PRIORITY
    for name in names:
        preload(servers, name, per_level, key_count=KEYS)
    return per_level * MAX_PRIORITY


def _plot(path: Path, runs: Mapping[str, list[dict[str, Any]]]) -> None:
    fig, ax = new_figure(figsize=(8, 4.5))
    for index, (name, results) in enumerate(runs.items()):
        for number, run in enumerate(results):
            times = [t - run["first"] for t, _ in run["rss_samples"]]
            ax.plot(times, [rss / MB for _, rss in run["rss_samples"]], color=f"C{index}",
                    alpha=0.8, label=name if number == 0 else None)
    ax.axhline(LIMIT_MB, color="black", linestyle=":", label=f"{LIMIT_MB} MB")
    ax.axvline(0, color="grey", linewidth=0.5)
    ax.set_xlabel("seconds from the first handled record")
    ax.set_ylabel("RSS of the executor's process (MB)")
    ax.set_title("Executor over a backlog: resident memory")
    ax.legend(loc="lower right")
    save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    records = 6_000 if args.smoke else args.records
    seconds = 1.0 if args.smoke else args.seconds
    rounds = 1 if args.smoke else args.rounds
    sides = ["default"] if args.smoke else args.sides
    clients = clients_of(args)
    topic = f"memory-{time.time_ns():x}"
    with broker(args) as servers:
        started = time.monotonic()
        if args.topic:
            topic, total = args.topic, records
        else:
            total = _preload_backlog(servers, topic, records, args.partitions)
        preload_s = time.monotonic() - started
        kinds = ["executor", "loop"] if args.loop else ["executor"]
        contenders = [
            contender_
            for side in sides
            for kind in kinds
            for contender_ in per_client(clients, _name(side, kind), contender, {
                "side": side, "servers": servers, "topic": topic, "seconds": seconds,
                "shards": args.shards, "handler_ms": args.handler_ms, "trace": args.trace,
                "kind": kind, "most": min(LOOP_RECORDS, total * 9 // 10),
            })
        ]
        runs = interleave(contenders, rounds, timeout_s=240 + seconds, monitor=watch_rss)
    figures: dict[str, dict[str, Any]] = {}
    for client in clients:
        figures[client] = {}
        for side in [_name(side, kind) for side in sides for kind in kinds]:
            name = f"{client}/{side}"
            per_run = [{**rss_figures(run), "records_per_s": run["records_per_s"],
                        "buffered_at_end": run["buffered_at_end"],
                        "kafka_python_loaded": run.get("kafka_python_loaded"),
                        "rss_mb_each_second": rss_series(run)}
                       for run in runs.results[name]]
            entry: dict[str, Any] = {
                key: statistics.median(run[key] for run in per_run)
                for key in ("peak_rss_mb", "steady_rss_mb", "records_per_s")
            }
            entry["per_round"] = per_run
            entry["under_limit"] = max(run["peak_rss_mb"] for run in per_run) < LIMIT_MB
            default = side.replace(side.split("/")[0], "default", 1)
            if side != default and "default" in sides:
                baseline = [{**rss_figures(run), "records_per_s": run["records_per_s"]}
                            for run in runs.results[f"{client}/{default}"]]
                for key in ("peak_rss_mb", "records_per_s"):
                    entry[f"{key}_over_default"] = ratio_summary(
                        [run[key] for run in per_run], [run[key] for run in baseline]
                    )
            if args.trace:
                entry["tracemalloc"] = [run["tracemalloc"] for run in runs.results[name]]
            figures[client][side] = entry
            print(f"{name}: peak {entry['peak_rss_mb']:.0f} MB, steady "
                  f"{entry['steady_rss_mb']:.0f} MB, {entry['records_per_s']:.0f} records/s "
                  f"(peaks {[round(run['peak_rss_mb']) for run in per_run]}; kafka-python "
                  f"loaded: {[run['kafka_python_loaded'] for run in per_run]})")
    _plot(args.out / f"{NAME}.png", runs.results)
    result = {
        "smoke": args.smoke,
        "records": total,
        "preload_s": preload_s,
        "partitions_per_level": args.partitions,
        "levels": MAX_PRIORITY,
        "keys": KEYS,
        "shards": args.shards,
        "handler_ms": args.handler_ms,
        "window_s": seconds,
        "rounds": rounds,
        "clients": clients,
        "sides": sides,
        "loop": args.loop,
        "limit_mb": LIMIT_MB,
        "runs": figures,
        "interleaving": runs.summary(),
        "plot": f"{NAME}.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
