"""ShardedExecutor beside Confluent's parallel-consumer, on the same broker, topic and handler.

parallel-consumer (``PC_VERSION`` on kafka-clients ``KAFKA_CLIENTS_VERSION``, resolved from
Maven Central and run in its own JVM: :mod:`benchmarks._parallel_consumer`) runs a
``ParallelStreamProcessor`` at ``maxConcurrency`` = the workers, in ``KEY`` or ``UNORDERED``
order; ``ShardedExecutor`` runs with ``shards`` = the workers in ``"key"`` or ``"unordered"``
order on each client family (``--client``), with its defaults otherwise (at-least-once with
the offset map; parallel-consumer with its own: ``PERIODIC_CONSUMER_ASYNCHRONOUS`` commits).
Every handler does nothing (``noop``) or sleeps 1 or 10 ms, and records its start and end.
``--styles`` chooses the executor's handler styles: ``thread`` (a plain function on the worker
threads, ``time.sleep``) and ``async`` (an ``async def`` handler awaiting ``asyncio.sleep``,
run as tasks of the executor's event loop; its contenders are named ``<client>-async``).

Cases: handler (0 = no-op, 1, 10 ms) x workers (16, 64) x ordering (key, unordered) x
partitions (1, 4) (``--quick``: no-op and 1 ms, 64 workers, key order, 1 partition). A case's
topic holds ``--records`` records for the no-op and, for a sleeping handler, as many as its
ideal rate handles in ``TARGET_S`` (at least 5,000), of 100 B over ``KEYS`` keys. Each round
runs every case on every side, each run a fresh process with a fresh group (forward in even
rounds, reversed in odd ones), for ``--rounds`` rounds.

Reported per case and side, per round and as medians: the whole-run rate (records over the
time from the start, group join included, to the last record), the steady-state rate (the
second half: the records after the half-way one over the time from its end to the last),
records per CPU-second (the process's CPU time from the start to the last record: for
parallel-consumer the JVM's own), the time to the first record and the largest offset map a
commit carried; the ideal rate (workers x 1000 / ms) and the share of it reached in steady
state; per round, ours / parallel-consumer of both rates (above 1: ours is faster); and the load
average before every run (``interleaving``).

``--long N`` adds a long no-op run of N records (64 workers, key order, one partition) on
every side: parallel-consumer stops taking records once its offset map outgrows the commit
metadata ("Payload size ... higher than threshold"); the run then ends after ``STALL_S``
without a record, and ``long`` says how many it handled, the warning and the largest map.
ShardedExecutor's offset map stays within ``offset_metadata_max_bytes`` (it carries the lowest
offsets), so it handles them all.

    .venv/bin/python -m benchmarks.executor_vs_pc [--smoke] [--quick] [--rounds R]
        [--client kafka-python|confluent|both] [--handlers-ms 0 1 10] [--workers 16 64]
        [--orderings key unordered] [--partitions 1 4] [--records N] [--long N]
        [--styles thread async]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import _executor as ex
from benchmarks import _parallel_consumer as pc
from benchmarks._clients import add_client_argument, clients_of, per_client
from benchmarks._common import (
    Contender,
    Interleaved,
    broker,
    create_topics,
    interleave,
    new_figure,
    parse_args,
    preload,
    ratio_summary,
    save_figure,
    unique,
    write_result,
)
from priority_kafka.executor import ShardedExecutor

NAME = "executor_vs_pc"
PC = "parallel-consumer"
KEYS = 10_000
#: Seconds of ideal work a sleeping handler's case holds.
TARGET_S = 3.0
#: The long run ends this long after its last record.
STALL_S = 20.0


def ideal_rate(sleep_ms: int, workers: int) -> float | None:
    """Records/s of ``workers`` sleeping ``sleep_ms`` each, with no overhead (None: no-op)."""
    return workers * 1000 / sleep_ms if sleep_ms else None


def case_records(sleep_ms: int, workers: int, noop_records: int, smoke: bool) -> int:
    """Records of a case: ``noop_records``, or ``TARGET_S`` of the ideal rate (at least 5,000,
    at most 200,000; 1,000 and 2,000 in a smoke run)."""
    rate = ideal_rate(sleep_ms, workers)
    if smoke:
        return 2_000 if rate is None else 1_000
    if rate is None:
        return noop_records
    return max(5_000, min(200_000, int(rate * TARGET_S)))


def case_name(sleep_ms: int, workers: int, ordering: str, partitions: int) -> str:
    handler = f"{sleep_ms}ms" if sleep_ms else "noop"
    return f"{handler}-{workers}w-{ordering}-{partitions}p"


def _sleeper(sleep_ms: int) -> Any:
    seconds = sleep_ms / 1000

    def work(record: Any) -> None:
        if seconds:
            time.sleep(seconds)

    return work


def _async_sleeper(sleep_ms: int) -> Any:
    seconds = sleep_ms / 1000

    async def work(record: Any) -> None:
        if seconds:
            await asyncio.sleep(seconds)

    return work


#: The executor's handler styles (``--styles``), and what a side's name adds for each.
STYLES = {"thread": "", "async": "-async"}


def side_name(client: str, style: str) -> str:
    """The executor side of ``client`` in handler ``style``: ``<client>`` or ``<client>-async``."""
    return client + STYLES[style]


def run_ours(
    client: str, bootstrap_servers: str, topic: str, records: int, workers: int, ordering: str,
    sleep_ms: int, timeout_s: float, style: str = "thread",
) -> dict[str, Any]:
    """Contender: ShardedExecutor on ``client`` to ``records`` records, its handler a plain
    function (``style`` "thread") or an ``async def`` one ("async")."""
    meter = ex.Meter(records)
    handler = (meter.wrap(_sleeper(sleep_ms)) if style == "thread"
               else meter.wrap_async(_async_sleeper(sleep_ms)))
    executor = ShardedExecutor(
        ex.executor_consumer(client, bootstrap_servers, [topic]), handler,
        shards=workers, ordering=ordering,  # type: ignore[arg-type]
    )
    times = ex.run_executor(executor, meter, timeout_s)
    stats = executor.stats()
    return {**times, "records": records, "half": records // 2, "ended": "records",
            "largest_offset_map": stats.largest_offset_map}


def run_pc(
    harness: pc.Harness, bootstrap_servers: str, topic: str, records: int, workers: int,
    ordering: str, sleep_ms: int, timeout_s: float, stall_s: float,
) -> dict[str, Any]:
    """Contender: parallel-consumer to ``records`` records (or ``stall_s`` without one)."""
    return pc.run(harness, bootstrap_servers, topic, unique("bench-pc"), records, workers,
                  ordering, sleep_ms, timeout_s, stall_s)


def _rates(result: dict[str, Any]) -> dict[str, float]:
    """A run's whole-run and steady-state rates and records per CPU-second."""
    records, half = result["records"], result["half"]
    return {
        "whole_per_s": records / result["wall_s"],
        "steady_per_s": (records - half) / result["second_half_s"],
        "per_cpu_s": records / result["cpu_s"],
        "first_record_s": result["first_record_s"],
        "largest_offset_map": result["largest_offset_map"],
    }


def _side_figures(
    interleaved: Interleaved, name: str, ideal: float | None
) -> tuple[dict[str, Any], list[dict[str, float]]]:
    per_round = [_rates(result) for result in interleaved.results[name]]
    figures: dict[str, Any] = {}
    for key in per_round[0]:
        values = [rates[key] for rates in per_round]
        figures[key] = statistics.median(values)
        figures[f"{key}_per_round"] = values
    if ideal is not None:
        figures["steady_of_ideal"] = figures["steady_per_s"] / ideal
        figures["steady_of_ideal_per_round"] = [r["steady_per_s"] / ideal for r in per_round]
    return figures, per_round


def _case_figures(
    interleaved: Interleaved, case: str, sides: Sequence[str], ideal: float | None
) -> dict[str, Any]:
    theirs, their_rounds = _side_figures(interleaved, f"{PC}/{case}", ideal)
    figures: dict[str, Any] = {"ideal_per_s": ideal, PC: theirs}
    for side in sides:
        ours, our_rounds = _side_figures(interleaved, f"{side}/{case}", ideal)
        ours["over_pc"] = {
            key: ratio_summary([r[key] for r in our_rounds], [r[key] for r in their_rounds])
            for key in ("whole_per_s", "steady_per_s", "per_cpu_s")
        }
        figures[side] = ours
        print(f"{case} {side}: steady {ours['steady_per_s']:,.0f}/s "
              f"(pc {theirs['steady_per_s']:,.0f}/s, ratio per round "
              f"{[round(x, 2) for x in ours['over_pc']['steady_per_s']['ratio_per_round']]}), "
              f"whole {[round(x, 2) for x in ours['over_pc']['whole_per_s']['ratio_per_round']]}"
              + (f", of ideal {ours['steady_of_ideal']:.2f}" if ideal else ""))
    return figures


def _long_run(
    servers: str, harness: pc.Harness, clients: Sequence[str], records: int
) -> dict[str, Any]:
    """The long no-op run on every side, once each (interleaved as one round)."""
    topic = unique("vs-pc-long")
    create_topics(servers, [topic])
    preload(servers, topic, records, key_count=KEYS)
    common = {"bootstrap_servers": servers, "topic": topic, "records": records, "workers": 64,
              "ordering": "key", "sleep_ms": 0, "timeout_s": 120 + records / 1000}
    runs = interleave([
        Contender(f"{PC}/long", run_pc, {**common, "harness": harness, "stall_s": STALL_S}),
        *per_client(clients, "long", run_ours, common),
    ], rounds=1)
    long: dict[str, Any] = {"records": records, "workers": 64, "ordering": "key",
                            "interleaving": runs.summary()}
    for side in (PC, *clients):
        result = runs.results[f"{side}/long"][0]
        long[side] = {key: result.get(key) for key in (
            "records", "ended", "largest_offset_map", "payload_warnings", "payload_warning")}
    return long


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=3, help="runs per case and side")
    add_client_argument(parser)
    parser.add_argument("--quick", action="store_true",
                        help="no-op and 1 ms, 64 workers, key order, 1 partition only")
    parser.add_argument("--handlers-ms", type=int, nargs="+", default=[0, 1, 10],
                        choices=[0, 1, 10], help="handler sleeps (0: no-op)")
    parser.add_argument("--workers", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--orderings", nargs="+", default=["key", "unordered"],
                        choices=["key", "unordered"])
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--records", type=int, default=100_000, help="records of a no-op case")
    parser.add_argument("--styles", nargs="+", default=["thread"], choices=list(STYLES),
                        help="the executor's handler styles: thread (time.sleep on the "
                             "workers), async (async def awaiting asyncio.sleep)")
    parser.add_argument("--long", type=int, default=0, metavar="N",
                        help="also the long no-op run of N records (0: none)")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    if args.quick or args.smoke:
        args.handlers_ms, args.workers, args.orderings, args.partitions = [0, 1], [64], ["key"], [1]
    rounds = 1 if args.smoke else args.rounds
    clients = clients_of(args)
    sides = [side_name(client, style) for client in clients for style in args.styles]
    # Resolved and built before the broker starts: a missing Maven or JDK fails at once.
    harness = pc.prepare()
    cases = [
        (sleep_ms, workers, ordering, partitions)
        for sleep_ms in args.handlers_ms for workers in args.workers
        for ordering in args.orderings for partitions in args.partitions
    ]
    records = {case: case_records(case[0], case[1], args.records, args.smoke) for case in cases}
    with broker(args) as servers:
        topics = {(count, case[3]): unique("vs-pc") for case, count in records.items()}
        for (count, partitions), topic in topics.items():
            create_topics(servers, [topic], partitions)
            preload(servers, topic, count, key_count=KEYS)
        contenders = []
        for case in cases:
            sleep_ms, workers, ordering, partitions = case
            count = records[case]
            common = {"bootstrap_servers": servers, "topic": topics[(count, partitions)],
                      "records": count, "workers": workers, "ordering": ordering,
                      "sleep_ms": sleep_ms,
                      "timeout_s": 120 + 10 * count * max(sleep_ms, 0.02) / 1000 / workers}
            name = case_name(*case)
            contenders.append(Contender(f"{PC}/{name}", run_pc,
                                        {**common, "harness": harness, "stall_s": 60.0}))
            contenders += [
                Contender(f"{side_name(client, style)}/{name}", run_ours,
                          {**common, "client": client, "style": style})
                for client in clients for style in args.styles
            ]
        interleaved = interleave(contenders, rounds)
        long = _long_run(servers, harness, clients, args.long) if args.long else None
    results = {
        case_name(*case): {
            "records": records[case],
            **_case_figures(interleaved, case_name(*case), sides,
                            ideal_rate(case[0], case[1])),
        }
        for case in cases
    }
    names = list(results)
    fig, ax = new_figure(figsize=(max(6, len(names) * 0.9), 4.5))
    width = 0.8 / (len(sides) + 1)
    for i, side in enumerate([PC, *sides]):
        offset = (i - len(sides) / 2) * width
        ax.bar([x + offset for x in range(len(names))],
               [results[n][side]["steady_per_s"] for n in names], width, label=side)
    ax.set_xticks(list(range(len(names))), names, rotation=45, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("steady-state records/s (second half, log)")
    ax.set_title(f"ShardedExecutor and parallel-consumer {pc.PC_VERSION}, median of {rounds}")
    ax.legend()
    save_figure(fig, args.out / f"{NAME}.png")
    result = {
        "smoke": args.smoke,
        "plot": f"{NAME}.png",
        "parallel_consumer": {"version": pc.PC_VERSION,
                              "kafka_clients": pc.KAFKA_CLIENTS_VERSION},
        "keys": KEYS,
        "rounds": rounds,
        "clients": clients,
        "styles": args.styles,
        "interleaving": interleaved.summary(),
        "cases": results,
        "long": long,
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
