"""Priority through ShardedExecutor: high-priority latency under saturation, and level shares.

Latency: a backlog of low-priority records (100 keys) saturates 8 workers running a 5 ms
handler. While it drains, high-priority records are produced at ``--rate``/s carrying their
send time; latency is send() to the start of their handler. PriorityConsumer + executor
(backlog on ``<topic>-0``, high records on ``<topic>-2``) is compared with the baseline measured
in the same run: the same executor over one FIFO topic holding the backlog and then the high
records. Target: p99 <= 200 ms through the priority path.

Shares: every level holds a backlog; the handler time each level gets (measured once all
levels run, while all are still backlogged) is compared with its reserved share of
``max_poll_records`` (29/14/7 of 50 for three levels), and with the baseline of the same executor
over a plain KafkaConsumer subscribed to the three topics (no notion of levels).
``executor_priority_latency.png`` (CDFs) and ``executor_priority_shares.png``.

The executor runs on ``--client`` kafka-python, confluent (``priority_kafka.confluent``'s
PriorityConsumer and a ``confluent_kafka.Consumer``, through the adapters of
``priority_kafka.confluent.executor``) or both (default): every side on each client.

Every run is a fresh process (a latency run also on fresh topics, its backlog produced first,
untimed); the sides of each part take turns for ``--rounds`` rounds (priority on each client
first in even rounds, the baseline first in odd ones). Per client: latencies pool every round's
records (``latency``, the target, the plot); ``p99_ratio`` is the median over the rounds of
FIFO p99 / priority p99 of the same round (``per_round``: each round's ratio, min, max). Shares
are the median per level over the rounds (each level on its own, so with several rounds they
need not sum to exactly 1; ``shares_per_round`` has each round's), and ``max_share_error`` is
measured on those medians. With both clients, ``confluent_vs_kafka_python`` has the per-round
ratios confluent / kafka-python of each side's p99 (``p99_ms``) and of each level's share
(``shares``). The load average before every run is under ``interleaving``.

    .venv/bin/python -m benchmarks.executor_priority [--smoke] [--backlog N] [--rate R]
        [--rounds R] [--client kafka-python|confluent|both]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from benchmarks._clients import (
    add_client_argument,
    client_ratios,
    clients_of,
    interleave_clients,
)
from benchmarks._common import (
    broker,
    create_level_topics,
    create_topics,
    new_figure,
    parse_args,
    preload,
    save_figure,
    unique,
    write_result,
)
from benchmarks._consumers import (
    MAX_PRIORITY,
    Pacer,
    is_stamped,
    latency_summary,
    low_latency_producer,
    plot_cdfs,
    stamp_of,
)
from benchmarks._executor import (
    executor_consumer,
)
from benchmarks._running import Running
from priority_kafka import priority_topic, split_priority_topic
from priority_kafka.executor import ShardedExecutor

NAME = "executor_priority"
SHARDS = 8
HANDLER_S = 0.005
KEYS = 100
MAX_POLL_RECORDS = 50


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backlog", type=int, default=16_000, help="low-priority records")
    parser.add_argument("--rate", type=float, default=20.0, help="high-priority records/s")
    parser.add_argument("--per-level", type=int, default=6_000, help="records per level (shares)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per side and part")
    add_client_argument(parser)


def _wait(running: Running, event: threading.Event, timeout_s: float, what: str) -> None:
    if not running.wait(event, timeout_s):
        raise TimeoutError(f"{what} not within {timeout_s:g} s "
                           f"(stats: {running.executor.stats()})")


def _latency(consumer: Any, pacer: Pacer, backlog: int) -> list[float]:
    """Latencies of the paced high-priority records while ``consumer``'s backlog drains."""
    latencies: list[float] = []
    low = [0]
    expected: list[int] = []
    started, drained, complete = threading.Event(), threading.Event(), threading.Event()
    lock = threading.Lock()

    def handler(record: Any) -> None:
        begin = time.perf_counter()
        with lock:
            if is_stamped(record.value):
                latencies.append(begin - stamp_of(record.value))
            else:
                low[0] += 1
            if expected and len(latencies) >= expected[0]:
                complete.set()
        started.set()
        if low[0] >= backlog:
            drained.set()
        time.sleep(HANDLER_S)

    executor = ShardedExecutor(consumer, handler, shards=SHARDS, max_in_flight_per_partition=1000)
    timeout_s = 120 + 2 * backlog * HANDLER_S / SHARDS
    with Running(executor) as running:
        _wait(running, started, 60, "first record")
        pacer.start()  # once the executor runs: the group join is not measured
        _wait(running, drained, timeout_s, "backlog drained")
        sent = pacer.finish()
        with lock:
            expected.append(sent)
            if len(latencies) >= sent:
                complete.set()
        _wait(running, complete, 60, "all high-priority records")
    return latencies


def _shares(consumer: Any, per_level: int) -> dict[str, float]:
    """Each level's share of handler time while every level is backlogged."""
    busy: defaultdict[int, float] = defaultdict(float)
    handled: Counter[int] = Counter()
    marks: dict[str, Any] = {}
    done = threading.Event()
    lock = threading.Lock()
    window = per_level // 2  # records measured; level 2 (58%) still has a backlog after it

    def handler(record: Any) -> None:
        start = time.perf_counter()
        time.sleep(HANDLER_S)
        level = split_priority_topic(record.topic)[1]
        with lock:
            busy[level] += time.perf_counter() - start
            handled[level] += 1
            if "from" not in marks and len(handled) == MAX_PRIORITY:
                marks["from"], marks["count"] = dict(busy), sum(handled.values())
            elif "from" in marks and sum(handled.values()) >= marks["count"] + window:
                marks.setdefault("to", dict(busy))
                done.set()

    executor = ShardedExecutor(consumer, handler, shards=SHARDS, max_in_flight_per_partition=300)
    with Running(executor) as running:
        _wait(running, done, 120 + 3 * per_level * HANDLER_S / SHARDS, "the measured window")
    used = {level: marks["to"][level] - marks["from"][level] for level in range(MAX_PRIORITY)}
    return {str(level): used[level] / sum(used.values()) for level in reversed(range(MAX_PRIORITY))}


def latency_side(
    client: str, bootstrap_servers: str, side: str, backlog: int, rate: float
) -> dict[str, Any]:
    """Contender: fresh topics with the backlog, then one side's high-priority latencies, the
    executor on ``client``.

    ``side`` "priority": PriorityConsumer, backlog on level 0, high records on level 2; "fifo":
    a raw consumer of one topic holding both.
    """
    if side == "priority":
        topic = unique("xlat")
        create_level_topics(bootstrap_servers, topic, MAX_PRIORITY)
        preload(bootstrap_servers, priority_topic(topic, 0), backlog, key_count=KEYS)
        consumer = executor_consumer(
            client, bootstrap_servers, [topic], levels=True, max_poll_records=MAX_POLL_RECORDS
        )
        target = priority_topic(topic, MAX_PRIORITY - 1)
    else:
        target = unique("xlat-fifo")
        create_topics(bootstrap_servers, [target])
        preload(bootstrap_servers, target, backlog, key_count=KEYS)
        consumer = executor_consumer(
            client, bootstrap_servers, [target], max_poll_records=MAX_POLL_RECORDS
        )
    producer = low_latency_producer(bootstrap_servers)
    try:
        latencies = _latency(consumer, Pacer(producer, target, lambda: 1 / rate), backlog)
    finally:
        producer.close()
    return {"latencies": latencies, **latency_summary(latencies)}


def shares_side(
    client: str, bootstrap_servers: str, side: str, topic: str, per_level: int
) -> dict[str, Any]:
    """Contender: each level's share of handler time through the executor on ``client``, fresh
    group (``share_<level>`` too, for the per-round ratios).

    ``side`` "priority": PriorityConsumer over the logical ``topic`` (its reserved shares
    reported too); "no_levels": a raw consumer subscribed to the level topics.
    """
    levels = side == "priority"
    topics = [topic] if levels else [priority_topic(topic, lv) for lv in range(MAX_PRIORITY)]
    consumer = executor_consumer(
        client, bootstrap_servers, topics, levels=levels, max_poll_records=MAX_POLL_RECORDS
    )
    result: dict[str, Any] = {}
    if levels:
        result["reserved"] = {
            str(level): q / MAX_POLL_RECORDS for level, q in consumer.levels.reserved.items()
        }
    shares = _shares(consumer, per_level)
    return {**result, "shares": shares, **{f"share_{lv}": v for lv, v in shares.items()}}


def _plot_shares(
    path: Any, reserved: dict[str, float], shares: dict[str, dict[str, dict[str, float]]],
    rounds: int,
) -> None:
    """Bars per level: the reserved share, and each client's shares with and without levels."""
    _, ax = new_figure(figsize=(8, 4.5))
    levels = list(reserved)
    xs = range(len(levels))
    bars: list[tuple[str, dict[str, float]]] = [("reserved", reserved)]
    for client, sides in shares.items():
        bars += [(f"PriorityConsumer, {client}", sides["priority"]),
                 (f"no levels, {client}", sides["no_levels"])]
    width = 0.8 / len(bars)
    for i, (label, values) in enumerate(bars):
        offset = (i - (len(bars) - 1) / 2) * width
        ax.bar([x + offset for x in xs], [values[level] for level in levels], width, label=label)
    ax.set_xticks(list(xs), [f"level {level}" for level in levels])
    ax.set_ylabel(f"share of handler time (median of {rounds} rounds)")
    ax.set_title("All levels backlogged")
    ax.legend()
    save_figure(ax.figure, path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    backlog = 1_500 if args.smoke else args.backlog
    per_level = 600 if args.smoke else args.per_level
    rounds = 1 if args.smoke else args.rounds
    share_topic = unique("xshare")
    clients = clients_of(args)
    with broker(args) as servers:
        create_level_topics(servers, share_topic, MAX_PRIORITY)
        for level in range(MAX_PRIORITY):
            preload(servers, priority_topic(share_topic, level), per_level, key_count=KEYS)
        latency_runs = interleave_clients(
            latency_side, ("priority", "fifo"), clients, rounds,
            bootstrap_servers=servers, backlog=backlog, rate=args.rate,
        )
        share_runs = interleave_clients(
            shares_side, ("priority", "no_levels"), clients, rounds,
            bootstrap_servers=servers, topic=share_topic, per_level=per_level,
        )
    reserved = share_runs.results[f"{clients[0]}/priority"][0]["reserved"]
    latencies = {
        client: {side: latency_runs.pooled(f"{client}/{side}", "latencies")
                 for side in ("priority", "fifo")}
        for client in clients
    }
    shares_per_round = {
        client: {side: share_runs.values(f"{client}/{side}", "shares")
                 for side in ("priority", "no_levels")}
        for client in clients
    }
    shares = {
        client: {
            side: {level: statistics.median(r[level] for r in per_round) for level in reserved}
            for side, per_round in sides.items()
        }
        for client, sides in shares_per_round.items()
    }
    p99 = {
        client: latency_runs.compare("p99_ms", f"{client}/fifo", f"{client}/priority")
        for client in clients
    }
    plot_cdfs(
        args.out / f"{NAME}_latency.png",
        {
            f"{label}, {client}": latencies[client][side]
            for client in clients
            for side, label in (("priority", "PriorityConsumer, level 2"),
                                ("fifo", "one FIFO topic"))
        },
        f"Produce-to-handler latency, {SHARDS} workers saturated by {backlog:,} low records",
    )
    _plot_shares(args.out / f"{NAME}_shares.png", reserved, shares, rounds)
    result = {
        "smoke": args.smoke,
        "shards": SHARDS,
        "handler_ms": HANDLER_S * 1000,
        "backlog": backlog,
        "rate_per_s": args.rate,
        "max_poll_records": MAX_POLL_RECORDS,
        "rounds": rounds,
        "clients": clients,
        "latency": {
            client: {side: latency_summary(values) for side, values in sides.items()}
            for client, sides in latencies.items()
        },
        "p99_ratio": {client: compared["ratio"] for client, compared in p99.items()},
        "per_round": {client: {"p99_ms": compared} for client, compared in p99.items()},
        "target_p99_ms": 200,
        "reserved_shares": reserved,
        "shares": shares,
        "shares_per_round": shares_per_round,
        "max_share_error": {
            client: max(abs(shares[client]["priority"][lv] - reserved[lv]) for lv in reserved)
            for client in clients
        },
        "confluent_vs_kafka_python": {
            "p99_ms": client_ratios(latency_runs, clients, ("priority", "fifo"), "p99_ms"),
            "shares": {
                level: client_ratios(share_runs, clients, ("priority",), f"share_{level}")
                for level in reserved
            },
        },
        "interleaving": {"latency": latency_runs.summary(), "shares": share_runs.summary()},
        "plots": [f"{NAME}_latency.png", f"{NAME}_shares.png"],
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
