"""The executor's ceiling: a no-op handler through ShardedExecutor against the bare consumer loop.

A logical topic of 3 levels (one partition each) holds ``--records`` records of 100 B over 1,000
keys, spread evenly over the levels. The baseline is the priority consumer's own loop on the same
client (kafka-python ``PriorityConsumer.poll()``, confluent ``PriorityConsumer.consume()``),
doing nothing with the records. Each executor case runs ``ShardedExecutor`` over the same
consumer with a handler that does nothing, in ``"key"`` or ``"unordered"`` order, on 1, 8 or 64
shards: what is left between the two is the executor's own cost per record.

Rates are measured once records flow (the group join excluded): the loop from the first poll
returning records to the one returning the last; an executor from the first handled record to
the last (seen from ``stats()``, sampled every 5 ms), with the process CPU time over the same
interval (every thread, the client's included): records/s and records per CPU-second.

Every run is a fresh process and a fresh consumer group; each round runs every contender of
every client (the loop, then each case, in even rounds; the reverse in odd ones). Reported per
client and case: both rates per round and their medians, and the ratio case / loop per round
(the same round's loop), its median, min and max; the targets (``ratio`` of records/s at least
0.5 on kafka-python, 0.1 on confluent); the load average before every run is under
``interleaving``. ``executor_ceiling.png`` plots the median ratios.

    .venv/bin/python -m benchmarks.executor_ceiling [--smoke] [--records N] [--rounds R]
        [--client kafka-python|confluent|both] [--shards 1 8 64] [--orderings key unordered]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._clients import (
    CLIENTS,
    add_client_argument,
    clients_of,
    interleave_clients,
)
from benchmarks._code import family
from benchmarks._common import (
    broker,
    new_figure,
    parse_args,
    preload,
    ratio_summary,
    save_figure,
    unique,
    write_result,
)
from benchmarks._consumers import MAX_POLL_RECORDS, MAX_PRIORITY, priority_consumer
from benchmarks._executor import (
    executor_consumer,
)
from benchmarks._running import Running
from priority_kafka import create_priority_topics
from priority_kafka.executor import ShardedExecutor

NAME = "executor_ceiling"
KEYS = 1000
LOOP = "loop"
#: Executor / loop ratio of records/s a client's executor must reach (issue 22), by whether
#: it is librdkafka's (Family.librdkafka): kafka-python's calls, librdkafka's.
_TARGETS = (0.5, 0.1)


def target(client: str) -> float:
    """The executor / loop ratio ``client``'s executor must reach."""
    return _TARGETS[family(client).librdkafka]
#: How often the benchmark thread reads the executor's counters (the resolution of its times).
_SAMPLE_S = 0.005


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=150_000, help="total over the 3 levels")
    parser.add_argument("--rounds", type=int, default=3, help="runs per contender")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument(
        "--orderings", nargs="+", choices=("key", "partition", "unordered"),
        default=["key", "unordered"],
    )
    add_client_argument(parser)


def _noop(record: Any) -> None:
    """The handler: nothing, so what is measured is the executor."""


def _rates(
    records: int, started: tuple[float, float], ended: tuple[float, float]
) -> dict[str, Any]:
    """Records/s and records per CPU-second between two (wall, cpu) readings."""
    wall, cpu = ended[0] - started[0], ended[1] - started[1]
    return {
        "records": records, "wall_s": wall, "cpu_s": cpu,
        "records_per_s": records / wall, "records_per_cpu_s": records / cpu,
    }


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _loop(client: str, servers: str, topic: str, total: int, timeout_s: float) -> dict[str, Any]:
    """The priority consumer's own loop: read ``total`` records and drop them."""
    consumer: Any
    if not family(client).librdkafka:
        consumer = priority_consumer(servers, topic)

        def read() -> int:
            return sum(map(len, consumer.poll(timeout_ms=100).values()))
    else:
        from priority_kafka.confluent import PriorityConsumer

        consumer = PriorityConsumer({
            "bootstrap.servers": servers, "group.id": unique("bench"),
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "max.priority": MAX_PRIORITY, "max.poll.records": MAX_POLL_RECORDS,
        })
        consumer.subscribe([topic])

        def read() -> int:
            return len(consumer.consume(MAX_POLL_RECORDS, 0.1))

    try:
        deadline = time.perf_counter() + timeout_s
        seen, first, first_batch = 0, (0.0, 0.0), 0
        while seen < total:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"read {seen} of {total} records in {timeout_s:g} s")
            got = read()
            if got and not seen:
                first, first_batch = _now(), got  # the first batch came with the join
            seen += got
        return _rates(seen - first_batch, first, _now())
    finally:
        consumer.close()


def _executor(
    client: str, servers: str, topic: str, total: int, timeout_s: float, ordering: str,
    shards: int,
) -> dict[str, Any]:
    """ShardedExecutor with a no-op handler until ``total`` records are handled."""
    executor = ShardedExecutor(
        executor_consumer(client, servers, [topic], levels=True), _noop,
        shards=shards, ordering=ordering,
    )
    running = Running(executor)
    try:
        deadline = time.perf_counter() + timeout_s
        first: tuple[float, float] | None = None
        handled_at_first = 0
        while running.error is None:
            handled = executor.stats().handled
            if handled and first is None:
                first, handled_at_first = _now(), handled
            if handled >= total:
                assert first is not None
                return _rates(handled - handled_at_first, first, _now())
            if time.perf_counter() > deadline:
                raise TimeoutError(
                    f"handled {handled} of {total} records in {timeout_s:g} s "
                    f"({executor.stats()})"
                )
            time.sleep(_SAMPLE_S)
        raise running.error
    finally:
        running.stop()


def contender(
    client: str, side: str, servers: str, topic: str, total: int, timeout_s: float
) -> dict[str, Any]:
    """One run (a fresh process and group): the loop, or the executor case ``side``
    (``<ordering>-<shards>``)."""
    if side == LOOP:
        return _loop(client, servers, topic, total, timeout_s)
    ordering, shards = side.rsplit("-", 1)
    return _executor(client, servers, topic, total, timeout_s, ordering, int(shards))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    records = 3_000 if args.smoke else args.records
    rounds = 1 if args.smoke else args.rounds
    shard_counts = [8] if args.smoke else args.shards
    cases = [f"{ordering}-{shards}" for ordering in args.orderings for shards in shard_counts]
    clients = clients_of(args)
    per_level = records // MAX_PRIORITY
    total = per_level * MAX_PRIORITY
    topic = unique("ceiling")
    with broker(args) as servers:
        for level_topic in create_priority_topics(servers, topic, MAX_PRIORITY):
            preload(servers, level_topic, per_level, key_count=KEYS)
        runs = interleave_clients(
            contender, [LOOP, *cases], clients, rounds,
            servers=servers, topic=topic, total=total, timeout_s=120 + total / 2000,
        )
    figures: dict[str, dict[str, Any]] = {}
    for client in clients:
        loop = {key: runs.values(f"{client}/{LOOP}", key)
                for key in ("records_per_s", "records_per_cpu_s")}
        figures[client] = {
            LOOP: {**{key: statistics.median(v) for key, v in loop.items()},
                   **{f"{key}_per_round": v for key, v in loop.items()}},
        }
        for case in cases:
            name = f"{client}/{case}"
            entry: dict[str, Any] = {}
            for key in ("records_per_s", "records_per_cpu_s"):
                values = runs.values(name, key)
                entry[key] = statistics.median(values)
                entry[f"{key}_per_round"] = values
                entry[f"{key}_over_loop"] = ratio_summary(values, loop[key])
            entry["meets_target"] = entry["records_per_s_over_loop"]["ratio"] >= target(client)
            figures[client][case] = entry
            print(f"{name}: {entry['records_per_s']:.0f}/s "
                  f"({entry['records_per_cpu_s']:.0f}/CPU-s), "
                  f"x{entry['records_per_s_over_loop']['ratio']:.3f} the loop (rounds "
                  f"{[round(r, 3) for r in entry['records_per_s_over_loop']['ratio_per_round']]})")
    fig, ax = new_figure(figsize=(7, 4.5))
    width = 0.8 / len(clients)
    for index, client in enumerate(clients):
        ax.bar([i + index * width for i in range(len(cases))],
               [figures[client][case]["records_per_s_over_loop"]["ratio"] for case in cases],
               width, label=client)
        ax.axhline(target(client), color=f"C{index}", linestyle=":",
                   label=f"target, {client}")
    ax.set_xticks([i + width * (len(clients) - 1) / 2 for i in range(len(cases))], cases)
    ax.set_ylabel("records/s: executor / bare loop")
    ax.set_title("No-op handler: the executor against the consumer's own loop")
    ax.legend()
    save_figure(fig, args.out / f"{NAME}.png")
    result = {
        "smoke": args.smoke,
        "records": total,
        "keys": KEYS,
        "rounds": rounds,
        "clients": clients,
        "cases": cases,
        "targets": {client: target(client) for client in CLIENTS},
        "runs": figures,
        "interleaving": runs.summary(),
        "plot": f"{NAME}.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
