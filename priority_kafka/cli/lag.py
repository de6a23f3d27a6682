"""``priority-kafka lag``: a group's lag per level and partition."""

from __future__ import annotations

import argparse
import collections
from typing import Any

from priority_kafka.cli._common import (
    CliError,
    add_bootstrap,
    add_json,
    emit_json,
    example,
    positive,
)
from priority_kafka.cli._levels import add_wait_for_topics, resolve_levels


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "lag", help="a consumer group's lag per priority level and partition",
        description="End offset, committed offset and lag of every partition of "
        "<topic>-0 .. <topic>-(N-1) for the group (whose level groups are <group>-<level>), "
        "with totals per level.",
        epilog=example("priority-kafka lag orders --max-priority 3 -g billing "
                       "-b localhost:9092 --json"),
    )
    parser.add_argument("topic", help="the logical topic")
    parser.add_argument("--group-id", "-g", required=True)
    parser.add_argument("--max-priority", "-n", type=positive(int), default=None,
                        help="number of levels (default: the levels the topic has on the broker)")
    add_wait_for_topics(parser)
    add_bootstrap(parser)
    add_json(parser)
    parser.set_defaults(run=run)


def read_lag(servers: str, topic: str, group_id: str, max_priority: int) -> dict[str, Any]:
    """``{"partitions": [...], "levels": {level: lag}, "total": lag}``."""
    from kafka.errors import UnknownTopicOrPartitionError

    from priority_kafka.metrics import LagReader

    reader = LagReader(servers, topic, group_id, max_priority)
    try:
        partitions = reader.read()
    except UnknownTopicOrPartitionError:
        raise CliError(f"the priority topics of {topic!r} do not exist") from None
    finally:
        reader.close()
    levels: dict[int, int] = collections.Counter()
    rows: list[dict[str, Any]] = []
    for (name, partition), values in partitions.items():
        levels[values["level"]] += values["lag"]
        rows.append({"topic": name, "partition": partition, **values})
    rows.sort(key=lambda row: (-row["level"], row["partition"]))
    return {
        "topic": topic, "group_id": group_id, "partitions": rows,
        "levels": dict(sorted(levels.items(), reverse=True)), "total": sum(levels.values()),
    }


def run(args: argparse.Namespace) -> int:
    max_priority = resolve_levels(
        args.bootstrap_servers, [args.topic], args.max_priority, wait=args.wait_for_topics
    )
    assert max_priority is not None  # plain topics are not allowed: a number or an error
    result = read_lag(args.bootstrap_servers, args.topic, args.group_id, max_priority)
    if args.json:
        emit_json(result)
        return 0
    print(f"{'level':>5} {'topic':<40} {'partition':>9} {'end':>10} {'committed':>10} {'lag':>10}")
    for row in result["partitions"]:
        print(f"{row['level']:>5} {row['topic']:<40} {row['partition']:>9} {row['end']:>10} "
              f"{row['committed']:>10} {row['lag']:>10}")
    totals = ", ".join(f"level {level}: {lag}" for level, lag in result["levels"].items())
    print(f"total lag {result['total']} ({totals})")
    return 0
