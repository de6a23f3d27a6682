"""Capacity burst over time, and throughput with one active level vs a raw consumer.

Timeline: a PriorityConsumer (3 levels, ``max_poll_records`` 500, reserved 287/142/71) whose
handler costs ``--handler-us`` per record (200 us, slept once per batch, so it manages a
little under 5,000 records/s) reads while producers start and stop per level, each sending
``--rate`` records/s (1,600/s) while on: phases of ``--phase-seconds`` (5 s) with levels
{0}, {0,1}, {0,1,2}, {1,2}, {2}, then none until the backlog is read. One or two active
levels are within the consumer's capacity; three exceed it, so quotas and bursts decide who
is served, and the backlog left behind drains once levels stop.
Every poll's per-level record count (counted from the poll result) and quota (from
``PriorityConsumer.metrics()``) go to ``burst_timeline.png``, one line per level.

Throughput: records pre-loaded on the lowest level only, read by PriorityConsumer (which must
burst level 0 from its reserved 71 to the whole 500) and by a raw ``KafkaConsumer`` on that
topic, each read in a fresh process, taking turns for ``--rounds`` rounds (priority first in
even rounds, raw first in odd ones): ``ratio`` is the median over the rounds of
PriorityConsumer / raw records/s from the first poll; ``single_level`` has the per-round
ratios, the steady-state and per-CPU-second ratios, and the load average before every read.

    .venv/bin/python -m benchmarks.burst [--smoke] [--records N] [--rounds R] [--phase-seconds S]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

from kafka import KafkaProducer

from benchmarks._common import (
    broker,
    new_figure,
    parse_args,
    preload,
    save_figure,
    unique,
    write_result,
)
from benchmarks._consumers import (
    MAX_POLL_RECORDS,
    MAX_PRIORITY,
    Pacer,
    compare_drains,
    priority_consumer,
    wait_assigned,
)
from priority_kafka import create_priority_topics, priority_topic

NAME = "burst"
#: Active levels per phase; the last phase (none) lasts until the backlog is read.
PHASES: tuple[frozenset[int], ...] = tuple(
    frozenset(levels) for levels in ((0,), (0, 1), (0, 1, 2), (1, 2), (2,), ())
)
_TICK_S = 0.01


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=150_000, help="single-level throughput")
    parser.add_argument("--rounds", type=int, default=3, help="throughput reads per consumer")
    parser.add_argument("--phase-seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=1600, help="records/s per active level")
    parser.add_argument("--handler-us", type=float, default=200.0, help="cost per record (us)")


def _timeline(
    servers: str, args: argparse.Namespace, phase_s: float, rate: int
) -> dict[str, Any]:
    """Run the phases; return per-poll times, counts and quotas per level."""
    topic = unique("burst")
    create_priority_topics(servers, topic, MAX_PRIORITY)
    consumer = priority_consumer(servers, topic)
    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=5, acks=1)
    pacers: dict[int, Pacer] = {}
    sent = 0
    polls: list[dict[str, Any]] = []
    try:
        wait_assigned(consumer, MAX_PRIORITY)
        received = 0
        phase = -1
        start = time.perf_counter()
        drain_deadline = float("inf")
        while phase < len(PHASES) - 1 or received < sent:
            now = time.perf_counter() - start
            if now > drain_deadline:
                raise TimeoutError(f"read {received} of {sent} records")
            due = min(int(now / phase_s), len(PHASES) - 1)
            if due != phase:
                phase = due
                for level in set(pacers) - PHASES[phase]:
                    sent += pacers.pop(level).finish()
                for level in PHASES[phase] - set(pacers):
                    pacers[level] = Pacer(
                        producer, priority_topic(topic, level), lambda: _TICK_S,
                        per_tick=max(1, round(rate * _TICK_S)),
                    )
                    pacers[level].start()
                if phase == len(PHASES) - 1:
                    drain_deadline = now + 120
            batch = consumer.poll(timeout_ms=100)
            counts = dict.fromkeys(range(MAX_PRIORITY), 0)
            for tp, records in batch.items():
                counts[consumer.priority_of(tp.topic)] += len(records)
            received += sum(counts.values())
            metrics = consumer.metrics()
            polls.append({
                "t": now,
                "phase": phase,
                "counts": counts,
                "quotas": {level: metrics[level]["last_quota"] for level in counts},
            })
            time.sleep(sum(counts.values()) * args.handler_us / 1e6)
        bursts = {level: m["burst_count"] for level, m in consumer.metrics().items()}
    finally:
        for pacer in pacers.values():
            pacer.finish()
        producer.close()
        consumer.close()
    return {"sent": sent, "received": received, "burst_counts": bursts, "polls": polls}


def _plot(polls: Sequence[dict[str, Any]], phase_s: float, path: Any) -> None:
    fig, (counts_ax, quotas_ax) = new_figure(2, 1, figsize=(10, 7), sharex=True)
    times = [p["t"] for p in polls]
    for level in range(MAX_PRIORITY - 1, -1, -1):
        counts_ax.plot(times, [p["counts"][level] for p in polls], lw=0.8, label=f"level {level}")
        quotas_ax.plot(times, [p["quotas"][level] for p in polls], lw=0.8, label=f"level {level}")
    for index, levels in enumerate(PHASES):
        active = "{" + ",".join(str(level) for level in sorted(levels)) + "}" if levels else "none"
        for ax in (counts_ax, quotas_ax):
            ax.axvline(index * phase_s, color="grey", lw=0.5, ls="--")
        counts_ax.text(index * phase_s, 1.01, f"producing {active}", fontsize=8,
                       transform=counts_ax.get_xaxis_transform())
    counts_ax.set_ylabel("records per poll")
    quotas_ax.set_ylabel("quota of the poll")
    quotas_ax.set_xlabel("seconds")
    counts_ax.legend(loc="upper right")
    fig.suptitle("PriorityConsumer: per-level records and quotas per poll (max_poll_records 500)")
    save_figure(fig, path)


def _single_level(servers: str, records: int, rounds: int) -> dict[str, Any]:
    """Level 0 alone pre-loaded: PriorityConsumer (3 levels) vs a raw consumer of that topic."""
    topic = unique("burst-single")
    create_priority_topics(servers, topic, MAX_PRIORITY)
    low = priority_topic(topic, 0)
    preload(servers, low, records)
    comparison = compare_drains(
        servers, {"priority": ("priority", [topic], {}), "raw": ("raw", [low], {})}, records, rounds
    )
    return {"records": records, **comparison}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    phase_s = 0.7 if args.smoke else args.phase_seconds
    rate = 600 if args.smoke else args.rate
    records = 3_000 if args.smoke else args.records
    rounds = 1 if args.smoke else args.rounds
    with broker(args) as servers:
        timeline = _timeline(servers, args, phase_s, rate)
        single = _single_level(servers, records, rounds)
    args.out.mkdir(parents=True, exist_ok=True)
    _plot(timeline["polls"], phase_s, args.out / "burst_timeline.png")
    (args.out / "burst_polls.json").write_text(json.dumps(timeline["polls"]) + "\n")
    by_phase = []
    for index, levels in enumerate(PHASES):
        polls = [p for p in timeline["polls"] if p["phase"] == index and sum(p["counts"].values())]
        by_phase.append({
            "producing": sorted(levels),
            "polls": len(polls),
            "mean_records_per_poll": {
                level: sum(p["counts"][level] for p in polls) / len(polls) if polls else 0.0
                for level in range(MAX_PRIORITY - 1, -1, -1)
            },
            "max_quota": {
                level: max((p["quotas"][level] for p in polls), default=0)
                for level in range(MAX_PRIORITY - 1, -1, -1)
            },
        })
    result = {
        "max_poll_records": MAX_POLL_RECORDS,
        "handler_us_per_record": args.handler_us,
        "rate_per_level": rate,
        "phase_seconds": phase_s,
        "smoke": args.smoke,
        "timeline": {
            "sent": timeline["sent"],
            "received": timeline["received"],
            "burst_counts": timeline["burst_counts"],
            "phases": by_phase,
            "polls_file": "burst_polls.json",
        },
        "single_level": single,
        "ratio": single["ratio"],
        "plot": "burst_timeline.png",
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
