"""Seed scenario: one partition, a 10 ms I/O-like handler, ShardedExecutor with 1-64 shards.

A single-partition topic holds keyed records (10,000 distinct keys, 100 B). The handler sleeps
10 ms (a remote call). A plain kafka-python loop (poll, then handle each record in turn) is
the baseline measured in the same run; the ideal for N shards is N / 10 ms = N x 100 records/s
(computed, not measured). Each executor run reads ``shards x 100 x --seconds`` records in
``"key"`` order with its own consumer group.

The executor runs on ``--client`` kafka-python, confluent (``priority_kafka.confluent.executor``
adapters over a ``confluent_kafka.Consumer``) or both (default); the plain loop is kafka-python.

Every run (the plain loop and each client's shard count) is a fresh process; each round runs
all of them, in the order plain loop, 1 shard on each client, 8, 32, 64 in even rounds and the
reverse in odd ones, for ``--rounds`` rounds. Reported per client and shard count (``runs``):
throughput (records / processing second) per round and its median, the ratio to the ideal (of
the median; target >= 0.9 at 32 shards), and the speed-up over the plain loop: per round (that
round's executor rate / that round's plain-loop rate), its median (``speedup_vs_plain_loop``),
min and max. With both clients, ``confluent_vs_kafka_python`` has per shard count the rates and
the per-round ratios confluent / kafka-python. The load average before every run is under
``interleaving``. ``executor_seed.png`` plots the medians.

The executor runs with its defaults (at-least-once with the offset map); ``offset_map`` has,
per client and shard count, the metadata its commits carried (``largest`` and ``mean`` bytes).
``--guarantees at-least-once exactly-once`` runs every executor contender under those too
(``<client>/<shards>/<guarantee>``, see benchmarks/_executor.py; with exactly-once every
executor run, whatever its guarantee, also writes each record to an output topic, so all run
the same pipeline); ``guarantees`` then has the per-round throughput ratios of the offset map
and of exactly-once to at-least-once.
``--shards`` picks the shard counts.

    .venv/bin/python -m benchmarks.executor_seed [--smoke] [--seconds S] [--rounds R]
        [--client kafka-python|confluent|both] [--shards N ...]
        [--guarantees at-least-once exactly-once]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._clients import (
    add_client_argument,
    client_ratios,
    clients_of,
    per_client,
)
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
from benchmarks._executor import (
    Meter,
    add_guarantee_argument,
    executor_consumer,
    guarantee_ratios,
    guaranteed,
    plain_loop_rate,
    run_executor,
    with_guarantee,
)
from priority_kafka.executor import ShardedExecutor

NAME = "executor_seed"
HANDLER_S = 0.010
KEYS = 10_000


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=6.0, help="ideal seconds per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per contender")
    parser.add_argument("--shards", type=int, nargs="+", help="shard counts (default 1 8 32 64)")
    add_client_argument(parser)
    add_guarantee_argument(parser)


def _sleep(_: Any) -> None:
    time.sleep(HANDLER_S)


def plain_loop(bootstrap_servers: str, topic: str, count: int) -> dict[str, Any]:
    """Contender: the plain poll-then-handle loop's records/s over ``count`` records."""
    return {"records_per_s": plain_loop_rate(bootstrap_servers, topic, count, _sleep)}


def sharded(
    client: str, bootstrap_servers: str, topic: str, shards: int, count: int,
    guarantee: str | None = None, out_topic: str | None = None,
) -> dict[str, Any]:
    """Contender: ShardedExecutor on ``client`` with ``shards`` workers handling ``count``
    records, under ``guarantee`` (None: the defaults)."""
    meter = Meter(count)
    options, handler, cleanup = guaranteed(
        guarantee, client, bootstrap_servers, out_topic, meter.wrap(_sleep)
    )
    try:
        executor = ShardedExecutor(
            executor_consumer(client, bootstrap_servers, [topic],
                              read_committed=guarantee == "exactly-once"),
            handler, shards=shards, ordering="key",
            max_in_flight_per_partition=max(200, 4 * shards), **options,
        )
        times = run_executor(executor, meter, timeout_s=60 + 3 * count * HANDLER_S / shards)
    finally:
        cleanup()
    stats = executor.stats()
    # getattr: under --code the executor may be a commit's from before offset maps.
    offset_maps = getattr(stats, "offset_maps", 0)
    return {
        **times, "records_per_s": count / times["processing_s"],
        "largest_offset_map": getattr(stats, "largest_offset_map", 0),
        "mean_offset_map": getattr(stats, "offset_map_bytes", 0) / max(1, offset_maps),
        "commits": stats.commits + getattr(stats, "transactions", 0),
    }


def _run_figures(
    interleaved: Interleaved, name: str, shards: int, count: int,
    baseline_per_round: list[float],
) -> dict[str, Any]:
    """One contender's figures: rates per round, median, ratio to ideal, speed-up."""
    rates = interleaved.values(name, "records_per_s")
    rate = statistics.median(rates)
    ideal = shards / HANDLER_S
    speedup = ratio_summary(rates, baseline_per_round)
    print(f"{name} shards: {rate:.0f}/s = {rate / ideal:.2f} of ideal {ideal:.0f}/s, "
          f"x{speedup['ratio']:.1f} the plain loop (rounds {speedup['ratio_per_round']})")
    return {
        "records": count,
        "wall_s": statistics.median(interleaved.values(name, "wall_s")),
        "processing_s": statistics.median(interleaved.values(name, "processing_s")),
        "records_per_s": rate,
        "records_per_s_per_round": rates,
        "ideal_per_s": ideal,
        "ratio_to_ideal": rate / ideal,
        "speedup_vs_plain_loop": speedup["ratio"],
        "speedup_per_round": speedup["ratio_per_round"],
        "speedup_min": speedup["ratio_min"],
        "speedup_max": speedup["ratio_max"],
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    seconds = 0.5 if args.smoke else args.seconds
    rounds = 1 if args.smoke else args.rounds
    shard_counts = args.shards or ([1, 8] if args.smoke else [1, 8, 32, 64])
    counts = {shards: int(shards * seconds / HANDLER_S) for shards in shard_counts}
    topic = unique("seed")
    # With exactly-once, every executor run writes each record out (the same pipeline).
    out_topic = unique("seed-out") if "exactly-once" in args.guarantees else None
    clients = clients_of(args)
    guarantees: list[str | None] = [None, *args.guarantees]
    with broker(args) as servers:
        create_topics(servers, [topic] + ([out_topic] if out_topic else []))
        preload(servers, topic, max(counts.values()), key_count=KEYS)
        common = {"bootstrap_servers": servers, "topic": topic, "out_topic": out_topic}
        contenders = [
            Contender("plain_loop", plain_loop,
                      {"bootstrap_servers": servers, "topic": topic,
                       "count": max(20, int(seconds / HANDLER_S))}),
            *(contender for shards, count in counts.items() for guarantee in guarantees
              for contender in per_client(
                  clients, with_guarantee(str(shards), guarantee), sharded,
                  {**common, "shards": shards, "count": count, "guarantee": guarantee},
              )),
        ]
        interleaved = interleave(contenders, rounds)
    baseline_per_round = interleaved.values("plain_loop", "records_per_s")
    baseline = statistics.median(baseline_per_round)
    runs: dict[str, dict[str, dict[str, Any]]] = {client: {} for client in clients}
    for client in clients:
        for shards, count in counts.items():
            runs[client][str(shards)] = _run_figures(
                interleaved, f"{client}/{shards}", shards, count, baseline_per_round
            )
    fig, ax = new_figure(figsize=(6.5, 4.5))
    xs = list(counts)
    ax.plot(xs, [shards / HANDLER_S for shards in xs], "k--", label="ideal: shards / 10 ms")
    for client in clients:
        ax.plot(xs, [r["records_per_s"] for r in runs[client].values()], "o-",
                label=f"ShardedExecutor, {client}")
    ax.axhline(baseline, color="gray", linestyle=":", label=f"plain loop ({baseline:.0f}/s)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("shards (worker threads)")
    ax.set_ylabel("records / s")
    ax.set_title("One partition, 10 ms handler")
    ax.legend()
    save_figure(fig, args.out / f"{NAME}.png")
    result = {
        "smoke": args.smoke,
        "handler_ms": HANDLER_S * 1000,
        "keys": KEYS,
        "rounds": rounds,
        "clients": clients,
        "plain_loop_per_s": baseline,
        "plain_loop_per_s_per_round": baseline_per_round,
        "runs": runs,
        "confluent_vs_kafka_python": client_ratios(
            interleaved, clients, [str(shards) for shards in counts], "records_per_s"
        ),
        "offset_map": {
            client: {str(shards): {
                "largest_bytes": max(interleaved.values(f"{client}/{shards}",
                                                        "largest_offset_map")),
                "mean_bytes": statistics.median(interleaved.values(f"{client}/{shards}",
                                                                   "mean_offset_map")),
            } for shards in counts} for client in clients
        },
        "guarantees": guarantee_ratios(
            interleaved, [f"{client}/{shards}" for client in clients for shards in counts],
            args.guarantees, "records_per_s", lower_is_better=False,
        ),
        "interleaving": interleaved.summary(),
        "target_ratio_to_ideal_at_32": 0.9,
        "plot": f"{NAME}.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
