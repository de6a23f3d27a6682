"""``priority-kafka topics create|describe|delete``: the Kafka topics of a logical topic."""

from __future__ import annotations

import argparse
from typing import Any

from priority_kafka.cli._common import (
    CliError,
    add_bootstrap,
    add_json,
    emit_json,
    example,
    key_value,
    positive,
)


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "topics", help="create, describe or delete the priority topics of a logical topic",
        description="Manage <topic>-0 .. <topic>-(N-1), the Kafka topics of a logical topic "
        "with N priority levels (0 is the lowest).",
        epilog=example("priority-kafka topics create orders --max-priority 3 --partitions 4 "
                       "-b localhost:9092",
                       "priority-kafka topics describe orders -b localhost:9092 --json"),
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create", help="create the priority topics (existing ones are left alone)",
        epilog=example("priority-kafka topics create orders --max-priority 3 --partitions 4 "
                       "-b localhost:9092"),
    )
    create.add_argument("topic", help="the logical topic")
    create.add_argument("--max-priority", "-n", type=positive(int), required=True,
                        help="number of priority levels")
    create.add_argument("--partitions", type=positive(int), default=1,
                        help="partitions per level (default 1)")
    create.add_argument("--replication-factor", type=positive(int), default=1,
                        help="replicas of each partition (default 1; 3 on a production cluster)")
    create.add_argument("--min-insync-replicas", type=positive(int), default=None,
                        help="each topic's min.insync.replicas (default: the broker's)")
    create.add_argument("--config", "-c", action="append", default=[], type=key_value,
                        metavar="KEY=VALUE", help="topic configuration entry (repeatable)")
    add_bootstrap(create)
    add_json(create)
    create.set_defaults(run=run_create)

    describe = actions.add_parser(
        "describe", help="partitions, leaders and end offsets of each level",
        epilog=example("priority-kafka topics describe orders -b localhost:9092"),
    )
    describe.add_argument("topic", help="the logical topic")
    _add_max_priority(describe)
    add_bootstrap(describe)
    add_json(describe)
    describe.set_defaults(run=run_describe)

    delete = actions.add_parser(
        "delete", help="delete every level's topic",
        epilog=example("priority-kafka topics delete orders -b localhost:9092"),
    )
    delete.add_argument("topic", help="the logical topic")
    _add_max_priority(delete)
    add_bootstrap(delete)
    add_json(delete)
    delete.set_defaults(run=run_delete)


def _add_max_priority(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-priority", "-n", type=positive(int), default=None,
        help="number of priority levels; the topics must be exactly <topic>-0 .. <topic>-(N-1) "
        "(default: the levels that exist)",
    )


def _admin(servers: str) -> Any:
    from kafka.admin import KafkaAdminClient

    from priority_kafka.kafka_python._kafka import with_client_defaults

    return KafkaAdminClient(**with_client_defaults({"bootstrap_servers": servers}))


def level_topics(admin: Any, topic: str, max_priority: int | None = None) -> dict[int, str]:
    """The existing priority topics of ``topic``: level -> Kafka topic, highest first. With
    ``max_priority``, they must be exactly its levels (a CliError names those missing or
    beyond)."""
    from priority_kafka.naming import priority_topics, split_priority_topic

    found = {}
    for name in admin.list_topics():
        try:
            logical, level = split_priority_topic(name)
        except ValueError:
            continue
        if logical == topic:
            found[level] = name
    if not found:
        raise CliError(
            f"no priority topics of {topic!r} exist (expected {topic}-0, {topic}-1, ...)")
    if max_priority is not None:
        missing = [name for name in priority_topics(topic, max_priority)
                   if name not in found.values()]
        if missing:
            raise CliError(f"topics {', '.join(missing)} do not exist; create them with "
                           f"`priority-kafka topics create {topic} --max-priority {max_priority}`")
        beyond = [name for level, name in sorted(found.items()) if level >= max_priority]
        if beyond:
            raise CliError(f"{topic!r} has {max(found) + 1} levels: {', '.join(beyond)} "
                           f"exist beyond --max-priority {max_priority}")
    return dict(sorted(found.items(), reverse=True))


def run_create(args: argparse.Namespace) -> int:
    from priority_kafka import create_priority_topics

    names = create_priority_topics(
        args.bootstrap_servers, args.topic, args.max_priority, num_partitions=args.partitions,
        replication_factor=args.replication_factor,
        topic_configs=dict(item.split("=", 1) for item in args.config),
        min_insync_replicas=args.min_insync_replicas,
    )
    if args.json:
        emit_json({"topic": args.topic, "topics": names, "partitions": args.partitions})
    else:
        print(f"{args.topic}: {', '.join(names)} ({args.partitions} partitions each)")
    return 0


def describe(servers: str, topic: str, max_priority: int | None = None) -> list[dict[str, Any]]:
    """Per level: its topic, and per partition the leader and the earliest and end offsets."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    admin = _admin(servers)
    try:
        levels = level_topics(admin, topic, max_priority)
        descriptions = {d["name"]: d for d in admin.describe_topics(list(levels.values()))}
        partitions = [
            TopicPartition(name, p["partition_index"])
            for name in levels.values() for p in descriptions[name]["partitions"]
        ]
        ends = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
        starts = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.EARLIEST))
    finally:
        admin.close()
    return [
        {
            "level": level, "topic": name,
            "partitions": [
                {"partition": p["partition_index"], "leader": p["leader_id"],
                 "earliest": starts[TopicPartition(name, p["partition_index"])].offset,
                 "end": ends[TopicPartition(name, p["partition_index"])].offset}
                for p in sorted(descriptions[name]["partitions"],
                                key=lambda p: p["partition_index"])
            ],
        }
        for level, name in levels.items()
    ]


def run_describe(args: argparse.Namespace) -> int:
    levels = describe(args.bootstrap_servers, args.topic, args.max_priority)
    if args.json:
        emit_json({"topic": args.topic, "levels": levels})
        return 0
    print(f"{'level':>5} {'topic':<40} {'partition':>9} {'leader':>6} {'earliest':>10} {'end':>10}")
    for level in levels:
        for p in level["partitions"]:
            print(f"{level['level']:>5} {level['topic']:<40} {p['partition']:>9} "
                  f"{p['leader']:>6} {p['earliest']:>10} {p['end']:>10}")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    admin = _admin(args.bootstrap_servers)
    try:
        names = list(level_topics(admin, args.topic, args.max_priority).values())
        admin.delete_topics(names)
    finally:
        admin.close()
    if args.json:
        emit_json({"topic": args.topic, "deleted": names})
    else:
        print(f"deleted {', '.join(names)}")
    return 0
