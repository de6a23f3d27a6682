"""Confluent parallel-consumer's published scenario: ShardedExecutor's times against the ideal.

The workload of parallel-consumer's README: 10,000 records on one partition, random 0-5 ms of
work per record, 16 worker threads; "key" order with 1, 2, 5, 10, 20, 50 and 1000 distinct keys,
plus "partition" and "unordered" order. The work here is a sleep of a whole number of
milliseconds drawn uniformly from 0-4 (mean 2 ms), as Java's ``nextInt(5)`` gives. The random
draws are seeded, the same in every run. parallel-consumer itself runs beside the executor, on
the same broker and topics, in ``benchmarks.executor_vs_pc`` (its published times, which came
from another machine, are no longer compared with here).

The ideal for each case is computed, not measured: the sum of the sleeps that must run one
after another (the busiest lane: one key, or the partition), or the total spread over 16
workers, whichever is larger. The one baseline measured in
the same run, ``serial_sleeps_s``, is one thread sleeping every record's work in turn: on a busy
machine each ``sleep()`` overshoots, and that is the floor for the serial cases (partition
order, one key), whose ``over_serial_sleeps`` compares their processing time with it round by
round.

The executor runs on ``--client`` kafka-python, confluent (``priority_kafka.confluent.executor``
adapters over a ``confluent_kafka.Consumer``; the benchmark's name is Confluent's scenario, not
the client) or both (default).

Every run (each case on each client, and the serial sleeps) is a fresh process with its own
consumer group; each round runs all of them, serial sleeps first and then the cases in the
order below (each case on kafka-python, then on confluent) in even rounds, the reverse in odd
ones, for ``--rounds`` rounds. Reported per case and client (``cases``): our wall time
(``run()`` to the last record, group join included) and processing time (first to last
record), per round and their medians, and the ideal. With both clients,
``confluent_vs_kafka_python`` has per case the wall times and the per-round ratios
confluent / kafka-python (< 1: the confluent client is faster).
The load average before every run is under ``interleaving``; ``executor_confluent.png``
(medians).

The executor runs with its defaults (at-least-once with the offset map). ``--guarantees
at-least-once exactly-once`` runs every case under those too (``<client>/<case>/<guarantee>``,
see benchmarks/_executor.py; with exactly-once every case, whatever its guarantee, also
writes each record to an output topic, so all run the same pipeline); ``guarantees`` then
has, per case, the per-round ratios of at-least-once's time to the offset map's and to
exactly-once's (processing and wall time; above 0.95: the offset map costs less than 5%).

    .venv/bin/python -m benchmarks.executor_confluent [--smoke] [--rounds R]
        [--client kafka-python|confluent|both] [--cases NAME ...]
        [--guarantees at-least-once exactly-once]
"""

from __future__ import annotations

import argparse
import random
import statistics
import struct
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kafka import KafkaProducer

from benchmarks import _executor as ex
from benchmarks._clients import add_client_argument, client_ratios, clients_of, per_client
from benchmarks._common import (
    Contender,
    Interleaved,
    broker,
    create_topics,
    interleave,
    new_figure,
    parse_args,
    ratio_summary,
    save_figure,
    unique,
    write_result,
)
from priority_kafka.executor import ShardedExecutor

NAME = "executor_confluent"
RECORDS = 10_000
WORKERS = 16
KEY_COUNTS = (1, 2, 5, 10, 20, 50, 1000)
CASES = [*(f"key-{keys}" for keys in KEY_COUNTS), "partition", "unordered"]
_MS = struct.Struct(">B")


def _produce(servers: str, topic: str, keys: int, work_ms: Sequence[int]) -> None:
    """Records whose value is their work in ms (one byte), key ``i % keys``."""
    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=20, batch_size=256 * 1024)
    try:
        for i, ms in enumerate(work_ms):
            producer.send(topic, key=str(i % keys).encode(), value=_MS.pack(ms))
        producer.flush()
    finally:
        producer.close()


def _ideal_s(work_ms: Sequence[int], keys: int, ordering: str) -> float:
    """Lower bound of the wall time: the busiest serial lane, or the total over the workers."""
    spread = sum(work_ms) / 1000 / WORKERS
    if ordering == "unordered":
        return spread
    lanes: Counter[int] = Counter()
    for i, ms in enumerate(work_ms):
        lanes[0 if ordering == "partition" else i % keys] += ms
    return max(spread, max(lanes.values()) / 1000)


def _work(record: Any) -> None:
    time.sleep(_MS.unpack(record.value)[0] / 1000)


def serial_sleeps(work_ms: Sequence[int]) -> dict[str, Any]:
    """Contender: seconds one thread takes to sleep every record's work in turn, with this
    machine's timer overshoot: the floor for a serial lane (partition order, one key)."""
    start = time.perf_counter()
    for ms in work_ms:
        time.sleep(ms / 1000)
    return {"seconds": time.perf_counter() - start}


def run_case(
    client: str, bootstrap_servers: str, topic: str, ordering: str, records: int,
    total_work_s: float, guarantee: str | None = None, out_topic: str | None = None,
) -> dict[str, Any]:
    """Contender: ShardedExecutor on ``client`` with ``WORKERS`` workers in ``ordering`` over
    ``topic``, under ``guarantee`` (None: the defaults)."""
    meter = ex.Meter(records)
    options, handler, cleanup = ex.guaranteed(
        guarantee, client, bootstrap_servers, out_topic, meter.wrap(_work)
    )
    try:
        executor = ShardedExecutor(
            ex.executor_consumer(client, bootstrap_servers, [topic],
                                 read_committed=guarantee == "exactly-once"),
            handler, shards=WORKERS, ordering=ordering,  # type: ignore[arg-type]
            max_in_flight_per_partition=records, **options,
        )
        return ex.run_executor(executor, meter, timeout_s=30 + total_work_s)
    finally:
        cleanup()


def _case_figures(
    interleaved: Interleaved, name: str, ideal: float, serial_per_round: list[float],
) -> dict[str, Any]:
    """One contender's wall and processing times against the ideal."""
    walls = interleaved.values(name, "wall_s")
    processing = interleaved.values(name, "processing_s")
    wall, processing_s = statistics.median(walls), statistics.median(processing)
    figures: dict[str, Any] = {
        "wall_s": wall,
        "processing_s": processing_s,
        "wall_s_per_round": walls,
        "processing_s_per_round": processing,
        "ideal_s": ideal,
        "ours_over_ideal": processing_s / ideal,
    }
    if name.endswith(("/partition", "/key-1")):
        figures["over_serial_sleeps"] = ratio_summary(processing, serial_per_round)
    print(f"{name}: ours {wall:.2f} s (processing {processing_s:.2f} s, ideal {ideal:.2f} s), "
          f"wall per round {[round(w, 2) for w in walls]}")
    return figures


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=3, help="runs per case")
    add_client_argument(parser)
    ex.add_guarantee_argument(parser)
    parser.add_argument(
        "--cases", nargs="+", choices=CASES, help="only these cases (default: all)"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    records = 500 if args.smoke else RECORDS
    rounds = 1 if args.smoke else args.rounds
    draw = random.Random(20_230_101)
    work_ms = [draw.randrange(5) for _ in range(records)]
    cases = [(f"key-{k}", "key", k) for k in ((2, 50) if args.smoke else KEY_COUNTS)]
    cases += [("partition", "partition", 1000), ("unordered", "unordered", 1000)]
    if args.cases:
        cases = [case for case in cases if case[0] in args.cases]
    topics = {keys: unique(f"confluent-{keys}") for _, _, keys in cases}
    # With exactly-once, every case writes each record out (the same pipeline).
    out_topic = unique("confluent-out") if "exactly-once" in args.guarantees else None
    clients = clients_of(args)
    guarantees: list[str | None] = [None, *args.guarantees]
    with broker(args) as servers:
        create_topics(servers, sorted({*topics.values(), *([out_topic] if out_topic else [])}))
        for keys, topic in topics.items():
            _produce(servers, topic, keys, work_ms)
        interleaved = interleave(
            [
                Contender("serial_sleeps", serial_sleeps, {"work_ms": work_ms}),
                *(
                    contender
                    for name, ordering, keys in cases for guarantee in guarantees
                    for contender in per_client(
                        clients, ex.with_guarantee(name, guarantee), run_case, {
                            "bootstrap_servers": servers, "topic": topics[keys],
                            "ordering": ordering, "records": records,
                            "total_work_s": sum(work_ms) / 1000, "guarantee": guarantee,
                            "out_topic": out_topic,
                        })
                ),
            ],
            rounds,
        )
    serial_per_round = interleaved.values("serial_sleeps", "seconds")
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for name, ordering, keys in cases:
        ideal = _ideal_s(work_ms, keys, ordering)
        results[name] = {
            client: _case_figures(interleaved, f"{client}/{name}", ideal, serial_per_round)
            for client in clients
        }
    fig, ax = new_figure(figsize=(9, 4.5))
    names = list(results)
    xs = range(len(names))
    width = 0.8 / (len(clients) + 1)
    bars: list[tuple[str, list[float], str | None]] = [
        (f"ShardedExecutor on {client} (wall)",
         [results[n][client]["wall_s"] for n in names], None) for client in clients
    ]
    bars += [("ideal (serial lane or total / 16)",
              [results[n][clients[0]]["ideal_s"] for n in names], "lightgray")]
    for i, (label, values, color) in enumerate(bars):
        offset = (i - (len(bars) - 1) / 2) * width
        ax.bar([x + offset for x in xs], values, width, label=label, color=color)
    ax.set_xticks(list(xs), names, rotation=30)
    ax.set_yscale("log")
    ax.set_ylabel("seconds for 10,000 records (log)")
    ax.set_title("1 partition, 0-4 ms random work, 16 workers")
    ax.legend()
    save_figure(fig, args.out / f"{NAME}.png")
    result = {
        "smoke": args.smoke,
        "records": records,
        "workers": WORKERS,
        "work_ms": "uniform whole ms 0-4, seeded",
        "total_work_s": sum(work_ms) / 1000,
        "rounds": rounds,
        "clients": clients,
        "serial_sleeps_s": statistics.median(serial_per_round),
        "serial_sleeps_s_per_round": serial_per_round,
        "cases": results,
        "confluent_vs_kafka_python": client_ratios(
            interleaved, clients, [name for name, _, _ in cases], "wall_s"
        ),
        "guarantees": {
            kind: ex.guarantee_ratios(
                interleaved, [f"{client}/{name}" for client in clients for name, _, _ in cases],
                args.guarantees, f"{kind}_s", lower_is_better=True,
            ) for kind in ("processing", "wall")
        },
        "interleaving": interleaved.summary(),
        "plot": f"{NAME}.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
