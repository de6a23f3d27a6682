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

    .venv/bin/python -m benchmarks.executor_seed [--smoke] [--seconds S] [--rounds R]
        [--client kafka-python|confluent|both]
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
    executor_consumer,
    plain_loop_rate,
    run_executor,
)
from priority_kafka.executor import ShardedExecutor

NAME = "executor_seed"
HANDLER_S = 0.010
KEYS = 10_000


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=6.0, help="ideal seconds per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per contender")
    add_client_argument(parser)


def _sleep(_: Any) -> None:
    time.sleep(HANDLER_S)


def plain_loop(bootstrap_servers: str, topic: str, count: int) -> dict[str, Any]:
    """Contender: the plain poll-then-handle loop's records/s over ``count`` records."""
    return {"records_per_s": plain_loop_rate(bootstrap_servers, topic, count, _sleep)}


def sharded(
    client: str, bootstrap_servers: str, topic: str, shards: int, count: int
) -> dict[str, Any]:
    """Contender: ShardedExecutor on ``client`` with ``shards`` workers handling ``count``
    records."""
    meter = Meter(count)
    executor = ShardedExecutor(
        executor_consumer(client, bootstrap_servers, [topic]), meter.wrap(_sleep),
        shards=shards, ordering="key", max_in_flight_per_partition=max(200, 4 * shards),
    )
    times = run_executor(executor, meter, timeout_s=60 + 3 * count * HANDLER_S / shards)
    return {**times, "records_per_s": count / times["processing_s"]}


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
    shard_counts = [1, 8] if args.smoke else [1, 8, 32, 64]
    counts = {shards: int(shards * seconds / HANDLER_S) for shards in shard_counts}
    topic = unique("seed")
    clients = clients_of(args)
    with broker(args) as servers:
        create_topics(servers, [topic])
        preload(servers, topic, max(counts.values()), key_count=KEYS)
        common = {"bootstrap_servers": servers, "topic": topic}
        contenders = [
            Contender("plain_loop", plain_loop,
                      {**common, "count": max(20, int(seconds / HANDLER_S))}),
            *(contender for shards, count in counts.items() for contender in per_client(
                clients, str(shards), sharded, {**common, "shards": shards, "count": count}
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
        "interleaving": interleaved.summary(),
        "target_ratio_to_ideal_at_32": 0.9,
        "plot": f"{NAME}.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
