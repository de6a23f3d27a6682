"""``priority-kafka produce``: send records to a logical topic, with a rate and priority mix."""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from priority_kafka.cli._common import (
    CliError,
    add_bootstrap,
    add_json,
    emit_json,
    example,
    level_mix,
    positive,
    weights,
)
from priority_kafka.cli._view import Progress
from priority_kafka.errors import ConfigError
from priority_kafka.kafka_python._kafka import cluster_topics
from priority_kafka.naming import check_levels


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "produce", help="send generated records to a logical topic's priority levels",
        description="Send COUNT records (or for --duration seconds) of --value-size bytes with "
        "--keys distinct keys, spread over the levels by --priority-mix, at --rate records/s "
        "(0: as fast as the producer goes). The topics must exist (see `topics create`).",
        epilog=example("priority-kafka produce orders --max-priority 3 --count 10000 "
                       "--rate 2000 --priority-mix 6,3,1 --keys 100 -b localhost:9092"),
    )
    parser.add_argument("topic", help="the logical topic")
    parser.add_argument("--max-priority", "-n", type=positive(int), default=None,
                        help="levels to send to (default: the levels the topic has)")
    parser.add_argument("--count", type=positive(int), default=None,
                        help="records to send (default 10000 unless --duration is given)")
    parser.add_argument("--duration", type=positive(float, 0.1), default=None,
                        help="send for this many seconds (with --rate, count = rate x duration)")
    parser.add_argument("--rate", type=positive(float, 0), default=0.0,
                        help="records per second (default 0: unthrottled)")
    parser.add_argument("--keys", type=positive(int, 0), default=100,
                        help="distinct keys, key-<i> (0: no keys; default 100)")
    parser.add_argument("--priority-mix", type=weights, default=None, metavar="W0,W1,...",
                        help="relative share of each level, lowest first (default: equal)")
    parser.add_argument("--value-size", type=positive(int, 0), default=100,
                        help="bytes per value (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="random seed for levels and keys")
    add_bootstrap(parser)
    add_json(parser)
    parser.set_defaults(run=run)


def produce(
    send: Callable[[int, bytes | None, bytes], Any],
    count: int | None,
    mix: Sequence[float],
    *,
    rate: float = 0.0,
    duration_s: float | None = None,
    keys: int = 100,
    value_size: int = 100,
    seed: int = 0,
    on_sent: Callable[[int], None] | None = None,
) -> dict[int, int]:
    """Call ``send(level, key, value)`` ``count`` times (or until ``duration_s`` passes), levels
    drawn from ``mix`` (shares, lowest level first), paced at ``rate`` records/s when positive.
    Returns records sent per level."""
    chooser = random.Random(seed)
    levels = list(range(len(mix)))
    value = b"x" * value_size
    sent = dict.fromkeys(levels, 0)
    started = time.monotonic()
    deadline = started + duration_s if duration_s is not None else float("inf")
    total = 0
    batch = 1 if 0 < rate < 200 else 64
    while (count is None or total < count) and time.monotonic() < deadline:
        n = batch if count is None else min(batch, count - total)
        for level in chooser.choices(levels, weights=mix, k=n):
            key = f"key-{chooser.randrange(keys)}".encode() if keys else None
            send(level, key, value)
            sent[level] += 1
        total += n
        if on_sent is not None:
            on_sent(n)
        if rate > 0:
            ahead = started + total / rate - time.monotonic()
            if ahead > 0:
                time.sleep(min(ahead, max(0.0, deadline - time.monotonic())))
    return sent


def require_topics(servers: str, topic: str, max_priority: int | None) -> int:
    """The levels to produce to: ``max_priority``, or the levels ``topic`` has; fails with one
    line unless every one of them exists."""
    from priority_kafka.naming import existing_levels, missing_topics_message

    names = cluster_topics({"bootstrap_servers": servers})
    if max_priority is None:
        try:
            return check_levels(topic, names, setting="--max-priority")
        except ConfigError as exc:
            raise CliError(str(exc)) from None
    present = set(existing_levels(topic, names))
    missing = [f"{topic}-{level}" for level in range(max_priority) if level not in present]
    if missing:
        raise CliError(missing_topics_message(topic, missing, max_priority))
    return max_priority


def run(args: argparse.Namespace) -> int:
    from priority_kafka import PriorityProducer

    if args.max_priority is not None:
        level_mix(args.priority_mix, args.max_priority)  # bad input first, before the broker
    count = args.count
    if count is None and args.duration is None:
        count = 10_000
    if count is None and args.rate:
        count = int(args.rate * args.duration)
    max_priority = require_topics(args.bootstrap_servers, args.topic, args.max_priority)
    mix = level_mix(args.priority_mix, max_priority)
    producer = PriorityProducer(
        bootstrap_servers=args.bootstrap_servers, max_priority=max_priority, linger_ms=5,
    )
    try:
        started = time.monotonic()
        with Progress(f"producing to {args.topic}", count) as progress:
            sent = produce(
                lambda level, key, value: producer.send(args.topic, value, key=key,
                                                        priority=level),
                count, mix, rate=args.rate, duration_s=args.duration, keys=args.keys,
                value_size=args.value_size, seed=args.seed, on_sent=progress.advance,
            )
            producer.flush()
        elapsed = time.monotonic() - started
    finally:
        producer.close()
    total = sum(sent.values())
    summary = {
        "topic": args.topic, "records": total, "per_level": sent,
        "seconds": round(elapsed, 3), "records_per_s": round(total / elapsed, 1),
    }
    if args.json:
        emit_json(summary)
    else:
        levels = ", ".join(f"level {level}: {n}" for level, n in sorted(sent.items(), reverse=True))
        print(f"sent {total} records to {args.topic} in {elapsed:.1f} s "
              f"({total / elapsed:.0f}/s; {levels})")
    return 0
