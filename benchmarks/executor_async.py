"""``run_async()``: an ``async def`` handler awaiting 10 ms, on the caller's loop, against the ideal
and the thread executor.

One partition (the one level of a logical topic) holds ``--records`` records of 100 B over
10,000 keys (key ``n % 10000`` at offset ``n``), read in key order. Contenders, each a fresh
process and consumer group, interleaved (in even rounds in the given order, in odd ones
reversed; the load average read before every run):

- ``read``: the aio PriorityConsumer's own ``getmany`` loop, dropping the records: what one
  partition can deliver here (records/s);
- ``async-<C>``: ``await executor.run_async()`` over the aio PriorityConsumer, the handler
  ``async def`` awaiting ``asyncio.sleep(0.01)``, ``async_concurrency=C``;
- ``threads-<S>``: ``executor.run()`` over kafka-python's PriorityConsumer, the handler a plain
  function sleeping 10 ms (``time.sleep``), on ``S`` worker threads;
- ``pc-<C>``: Confluent's parallel-consumer (its JVM harness, :mod:`benchmarks._parallel_consumer`,
  as ``executor_vs_pc`` runs it) in ``KEY`` order at ``maxConcurrency`` ``C``, its handler
  sleeping 10 ms: the same concurrency as ``async-<C>`` (``--no-pc`` leaves it out).

A rate runs from the first handler start to the last handler end (the group join excluded),
with the process CPU time over it. Reported: records/s per round and median; each ``async-<C>``
against its ideal (``min(C / 0.01 s, read)``, per round: that round's ``read``), against the
best thread executor (the shard count with the highest median, per round) and against
``pc-<C>`` in the same round (parallel-consumer's rate also runs from its first handler start to
its last end; its CPU time is the JVM's from its start, group join included); the goal (at least
25,000 records/s at ``async_concurrency`` 1,000). ``max_in_flight_per_partition`` is
``4 * C + 1000`` (or S), so pausing never caps the concurrency asked for.

    .venv/bin/python -m benchmarks.executor_async [--smoke] [--records N] [--rounds R]
        [--concurrency 100 1000 10000] [--shards 64 256 1024] [--no-pc]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import _common as common
from benchmarks import _parallel_consumer as pc
from benchmarks._running import Running
from priority_kafka import create_priority_topics

NAME = "executor_async"
KEYS = 10_000
HANDLER_S = 0.01
READ = "read"
#: A parallel-consumer run ends this long after its last record if it has not reached the total.
STALL_S = 60.0
#: records/s the issue asks of async_concurrency 1,000 on this machine (issue 39).
GOAL = {"concurrency": 1000, "records_per_s": 25_000}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3, help="runs per contender")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[100, 1000, 10_000])
    parser.add_argument("--shards", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--no-pc", dest="pc", action="store_false",
                        help="leave parallel-consumer out (it needs Maven and a JDK)")


def _settings(servers: str) -> dict[str, Any]:
    return {"bootstrap_servers": servers, "group_id": common.unique("bench-async"),
            "auto_offset_reset": "earliest", "enable_auto_commit": False, "max_priority": 1}


class _Meter:
    """The first handler start and last handler end, and the CPU time at each."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.handled = 0
        self.first: tuple[float, float] | None = None
        self.last = (0.0, 0.0)

    def start(self) -> None:
        if self.first is None:
            self.first = time.perf_counter(), time.process_time()

    def end(self) -> bool:
        """One record done; whether it was the last."""
        self.handled += 1
        if self.handled < self.total:
            return False
        self.last = time.perf_counter(), time.process_time()
        return True

    def rates(self) -> dict[str, Any]:
        assert self.first is not None
        wall, cpu = self.last[0] - self.first[0], self.last[1] - self.first[1]
        return {"records": self.handled, "wall_s": wall, "cpu_s": cpu,
                "records_per_s": self.handled / wall, "records_per_cpu_s": self.handled / cpu}


async def _read(servers: str, topic: str, total: int, timeout_s: float) -> dict[str, Any]:
    from priority_kafka.aio import PriorityConsumer

    meter = _Meter(total)
    async with PriorityConsumer(topic, **_settings(servers)) as consumer:
        async with asyncio.timeout(timeout_s):
            while meter.handled < total:
                batch = await consumer.getmany(timeout_ms=100)
                for records in batch.values():
                    for _ in records:
                        meter.start()
                        meter.end()
    return meter.rates()


async def _async(
    servers: str, topic: str, total: int, timeout_s: float, concurrency: int
) -> dict[str, Any]:
    from priority_kafka.aio import PriorityConsumer
    from priority_kafka.executor import ShardedExecutor

    meter = _Meter(total)
    done = asyncio.Event()

    async def handler(record: Any) -> None:
        meter.start()
        await asyncio.sleep(HANDLER_S)
        if meter.end():
            done.set()

    consumer = PriorityConsumer(topic, **_settings(servers))
    await consumer.start()
    executor = ShardedExecutor(
        consumer, handler, async_concurrency=concurrency,
        max_in_flight_per_partition=4 * concurrency + 1000,
    )
    async with executor:
        await asyncio.wait_for(done.wait(), timeout_s)
    return {**meter.rates(), "executor": _stats(executor)}


def _threads(
    servers: str, topic: str, total: int, timeout_s: float, shards: int
) -> dict[str, Any]:
    from priority_kafka import PriorityConsumer
    from priority_kafka.executor import ShardedExecutor

    meter = _Meter(total)
    lock, done = threading.Lock(), threading.Event()

    def handler(record: Any) -> None:
        with lock:
            meter.start()
        time.sleep(HANDLER_S)
        with lock:
            if meter.end():
                done.set()

    executor = ShardedExecutor(
        PriorityConsumer(topic, **_settings(servers)), handler, shards=shards,
        max_in_flight_per_partition=4 * shards + 1000,
    )
    with Running(executor) as running:
        if not running.wait(done, timeout_s):
            raise TimeoutError(f"handled {meter.handled} of {total} in {timeout_s:g} s")
    return {**meter.rates(), "executor": _stats(executor)}


def _parallel_consumer(
    harness: pc.Harness, servers: str, topic: str, total: int, timeout_s: float, concurrency: int
) -> dict[str, Any]:
    """parallel-consumer at ``concurrency``, key order, its handler sleeping 10 ms, over the
    level's one Kafka topic; TimeoutError unless it handled them all."""
    result = pc.run(harness, servers, f"{topic}-0", common.unique("bench-async-pc"), total,
                    concurrency, "key", int(HANDLER_S * 1000), timeout_s, STALL_S)
    if result["records"] < total:
        raise TimeoutError(f"parallel-consumer handled {result['records']} of {total} "
                           f"({result['ended']})")
    wall = result["processing_s"]  # first handler start to last end, as _Meter's
    return {"records": result["records"], "wall_s": wall, "cpu_s": result["cpu_s"],
            "records_per_s": result["records"] / wall,
            "records_per_cpu_s": result["records"] / result["cpu_s"],
            "first_record_s": result["first_record_s"]}


def _stats(executor: Any) -> dict[str, int]:
    stats = executor.stats()
    return {"handled": stats.handled, "pauses": stats.pauses, "commits": stats.commits}


def contender(side: str, servers: str, topic: str, total: int, timeout_s: float,
              harness: pc.Harness | None = None) -> dict[str, Any]:
    """One run (a fresh process and group): ``read``, ``async-<C>``, ``threads-<S>`` or
    ``pc-<C>`` (with the parallel-consumer ``harness``)."""
    if side == READ:
        return asyncio.run(_read(servers, topic, total, timeout_s))
    kind, number = side.rsplit("-", 1)
    if kind == "async":
        return asyncio.run(_async(servers, topic, total, timeout_s, int(number)))
    if kind == "pc":
        assert harness is not None
        return _parallel_consumer(harness, servers, topic, total, timeout_s, int(number))
    return _threads(servers, topic, total, timeout_s, int(number))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = common.parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    records = 2_000 if args.smoke else args.records
    rounds = 1 if args.smoke else args.rounds
    concurrencies = [100, 1000] if args.smoke else args.concurrency
    shard_counts = [64] if args.smoke else args.shards
    asyncs = [f"async-{c}" for c in concurrencies]
    threads = [f"threads-{s}" for s in shard_counts]
    # parallel-consumer at the smoke's lowest concurrency only (a JVM start per run).
    pc_concurrencies = concurrencies[:1] if args.smoke else concurrencies
    pcs = [f"pc-{c}" for c in pc_concurrencies] if args.pc else []
    sides = [READ, *asyncs, *threads, *pcs]
    topic = common.unique("async-bench")
    with common.broker(args) as servers:
        create_priority_topics(servers, topic, 1)
        common.preload(servers, f"{topic}-0", records, key_count=KEYS)
        runs = common.interleave_sides(
            contender, sides, rounds, servers=servers, topic=topic,
            total=records, timeout_s=120 + records / 500,
            harness=pc.prepare() if pcs else None,
        )
    rate = {side: runs.values(side, "records_per_s") for side in sides}
    cpu = {side: runs.values(side, "records_per_cpu_s") for side in sides}
    # A side that failed every round (recorded in the interleaving's failed_runs) has no figures.
    done = [side for side in sides if rate[side]]
    threads_done = [side for side in threads if side in done]
    best = max(threads_done, key=lambda side: statistics.median(rate[side]), default=None)
    figures: dict[str, Any] = {}
    for side in [READ, *threads, *pcs]:
        if side in done:
            figures[side] = {"records_per_s": statistics.median(rate[side]),
                             "records_per_s_per_round": rate[side],
                             "records_per_cpu_s": statistics.median(cpu[side])}
    for side, concurrency in zip(asyncs, concurrencies, strict=True):
        if side not in done:
            continue
        figures[side] = {
            "concurrency": concurrency,
            "records_per_s": statistics.median(rate[side]),
            "records_per_s_per_round": rate[side],
            "records_per_cpu_s": statistics.median(cpu[side]),
        }
        # Per round against the others: over the rounds both completed.
        against = {"over_ideal": READ, "over_best_threads": best, "over_pc": f"pc-{concurrency}"}
        for label, other in against.items():
            if other not in done:
                continue
            ours, theirs = runs.paired("records_per_s", side, other)
            if not ours:
                continue
            if label == "over_ideal":
                theirs = [min(concurrency / HANDLER_S, read) for read in theirs]
                figures[side]["ideal_per_round"] = theirs
            figures[side][label] = common.ratio_summary(ours, theirs)
        print(f"{side}: {figures[side]['records_per_s']:.0f}/s"
              + "".join(f", x{figures[side][label]['ratio']:.3f} {other}"
                        for label, other in against.items() if label in figures[side]))
    goal_side = f"async-{GOAL['concurrency']}"
    meets_goal = (figures[goal_side]["records_per_s"] >= GOAL["records_per_s"]
                  if goal_side in figures else None)
    fig, ax = common.new_figure(figsize=(7, 4.5))
    shown = [*asyncs, *pcs, *threads, READ]
    shown = [side for side in shown if side in figures]
    ax.bar(shown, [figures[side]["records_per_s"] for side in shown])
    ax.axhline(GOAL["records_per_s"], color="C3", linestyle=":", label="goal at 1,000")
    ax.set_ylabel("records/s (median)")
    ax.set_title("async def handler awaiting 10 ms, key order, 10,000 keys, one partition")
    ax.legend()
    common.save_figure(fig, args.out / f"{NAME}.png")
    result = {
        "smoke": args.smoke, "records": records, "keys": KEYS, "handler_s": HANDLER_S,
        "rounds": rounds, "interleaving": runs.summary(), "plot": f"{NAME}.png",
        "runs": figures, "best_threads": best, "goal": GOAL, "meets_goal": meets_goal,
        "failed_runs": runs.failures,
        "parallel_consumer": {"version": pc.PC_VERSION,
                              "kafka_clients": pc.KAFKA_CLIENTS_VERSION} if pcs else None,
    }
    common.write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
