"""Group protocols side by side on confluent-kafka: member 1's records per second while a second
member joins and later leaves, classic eager (range), classic cooperative (cooperative-sticky)
and the consumer protocol (KIP-848, ``group.protocol=consumer``).

The scenario is :mod:`benchmarks.rebalance_timeline`'s (its traffic, buckets and gap measure),
with both members a ``ShardedExecutor`` over a confluent ``PriorityConsumer``. Classic members
use ``session.timeout.ms`` 10,000 and
``heartbeat.interval.ms`` 1,000, as rebalance_timeline's; consumer-protocol members get their
heartbeat interval from the broker (the local broker's 500 ms; Kafka's default is 5 s). Also
reported: ``second_full_s``, seconds from the join until member 2 has handled records of its
half of the partitions; ``commit_failures`` of member 1's executor (commits refused, retried by
the next one); ``duplicates`` (records handled more than once, by either member; per
membership change: over the join and the leave) and ``lost`` (records below a partition's final
committed offset that no member handled, from the first record member 1 handled there: before
it the group's first start skipped them, ``auto.offset.reset=latest``). Every run is a fresh
process on a fresh topic and group; sides take turns.

    .venv/bin/python -m benchmarks.group_protocol [--smoke] [--rate R] [--rounds R]
        [--join-at S] [--leave-at S] [--end-at S]
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from benchmarks._common import broker, interleave_sides, parse_args, write_result
from benchmarks.rebalance_timeline import (
    HANDLER_S,
    LEVELS,
    PARTITIONS,
    SHARDS,
    _add_arguments,
    join_and_leave,
    scenario,
)

NAME = "group_protocol"
SIDES: dict[str, dict[str, Any]] = {
    "classic-eager": {"partition.assignment.strategy": "range",
                      "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000},
    "classic-cooperative": {"partition.assignment.strategy": "cooperative-sticky",
                            "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000},
    "consumer": {"group.protocol": "consumer"},
}


class _ConfluentMember:
    """A ShardedExecutor over a confluent PriorityConsumer, running on a thread."""

    def __init__(self, servers: str, topic: str, group: str, settings: dict[str, Any],
                 times: list[float]) -> None:
        import threading

        from priority_kafka.confluent import PriorityConsumer
        from priority_kafka.executor import ShardedExecutor

        consumer = PriorityConsumer({
            "bootstrap.servers": servers, "group.id": group, "max.priority": LEVELS,
            "enable.auto.commit": False, "auto.offset.reset": "latest", **settings,
        })
        self.partitions: dict[tuple[str, int], float] = {}
        self.handled: list[tuple[str, int, int]] = []
        self.started = time.monotonic()
        self.servers, self.topic, self.group = servers, topic, group

        def handler(record: Any) -> None:
            time.sleep(HANDLER_S)  # the work a record takes, as in rebalance_timeline
            now = time.monotonic()
            times.append(now)
            self.partitions.setdefault((record.topic, record.partition), now)
            self.handled.append((record.topic, record.partition, record.offset))

        self.executor = ShardedExecutor(consumer, handler, shards=SHARDS)
        self.executor.subscribe([topic])
        self._thread = threading.Thread(target=self.executor.run, name="member", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.executor.stop()
        self._thread.join(60)


def duplicates_and_lost(members: Sequence[_ConfluentMember]) -> tuple[int, int]:
    """Records handled more than once, and records below the final commit handled by nobody
    (from the first one member 1 handled in each partition)."""
    from confluent_kafka import Consumer, TopicPartition

    handled = Counter(item for member in members for item in member.handled)
    duplicates = sum(count - 1 for count in handled.values())
    first = members[0]
    start: dict[tuple[str, int], int] = {}
    for topic, partition, offset in first.handled:
        start[(topic, partition)] = min(offset, start.get((topic, partition), offset))
    lost = 0
    for level in range(LEVELS):
        reader = Consumer({"bootstrap.servers": first.servers,
                           "group.id": f"{first.group}-{level}"})
        try:
            committed = reader.committed(
                [TopicPartition(f"{first.topic}-{level}", p) for p in range(PARTITIONS)], 30)
        finally:
            reader.close()
        for tp in committed:
            low = start.get((tp.topic, tp.partition))
            if low is not None and tp.offset > low:
                lost += sum((tp.topic, tp.partition, o) not in handled
                            for o in range(low, tp.offset))
    return duplicates, lost


def protocol_side(
    bootstrap_servers: str, side: str, rate: float, join_at: float, leave_at: float,
    end_at: float,
) -> dict[str, Any]:
    """Contender: member 1's handled records over time while member 2 joins and leaves."""
    run = join_and_leave(
        bootstrap_servers,
        lambda servers, topic, group, times: _ConfluentMember(
            servers, topic, group, SIDES[side], times),
        rate, join_at, leave_at, end_at,
    )
    first, second = run["first"], run["second"]
    duplicates, lost = duplicates_and_lost([first, second])
    # Since its start, when member 2 had handled records of half of the partitions.
    reached = sorted(second.partitions.values())
    half = LEVELS * PARTITIONS // 2
    return {
        "longest_gap_s": run["longest_gap_s"],
        "longest_gap_join_s": run["longest_gap_join_s"],
        "longest_gap_leave_s": run["longest_gap_leave_s"],
        "second_full_s": reached[half - 1] - second.started if len(reached) >= half else None,
        "second_member_partitions": len(reached),
        "commit_failures": first.executor.stats().get("commit_failures", 0),
        "handled_by_first": len(run["handled"]),
        "duplicates": duplicates,
        "duplicates_per_change": duplicates / 2,
        "lost": lost,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    if args.smoke:
        args.rounds, args.join_at, args.leave_at, args.end_at = 1, 1.0, 4.0, 6.0
    with broker(args) as servers:
        runs = interleave_sides(
            protocol_side, tuple(SIDES), args.rounds, bootstrap_servers=servers,
            rate=args.rate, join_at=args.join_at, leave_at=args.leave_at, end_at=args.end_at,
        )
    keys = ("longest_gap_s", "longest_gap_join_s", "longest_gap_leave_s", "second_full_s",
            "second_member_partitions", "commit_failures", "handled_by_first", "duplicates",
            "duplicates_per_change", "lost")
    per_round = {key: {side: runs.values(side, key) for side in SIDES} for key in keys}
    result = {
        **scenario(args),
        "median_longest_gap_s": {
            side: statistics.median(per_round["longest_gap_s"][side]) for side in SIDES
        },
        "per_round": per_round,
        "interleaving": runs.summary(),
    }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
