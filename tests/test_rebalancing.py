"""Rebalances through PriorityConsumer + ShardedExecutor against the real broker: partitions
added under traffic, cooperative-sticky, static membership, and the revoke-time commit."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.future import Future

from benchmarks._running import wait_for
from benchmarks.scenarios import (
    LEVELS,
    PICKUP_METADATA_MAX_AGE_MS,
    QUICK_SESSIONS,
    Handled,
    Member,
    OffCpu,
    Traffic,
    added_partition_pickup,
    partitions_of,
)
from priority_kafka import create_priority_topics
from priority_kafka.kafka_python._kafka import TopicPartition

pytestmark = pytest.mark.integration

COOPERATIVE = {"partition_assignment_strategy": [CooperativeStickyAssignor]}


@pytest.fixture
def members() -> Iterator[Callable[..., Member]]:
    """Start members; every one still running is stopped at the end."""
    started: list[Member] = []

    def start(*args: Any, **kwargs: Any) -> Member:
        started.append(Member(*args, **kwargs))
        return started[-1]

    yield start
    for member in started:
        if member.thread.is_alive():
            member.stop()


@pytest.fixture
def off_cpu() -> Iterator[OffCpu]:
    """This process's time off the CPUs, noted from now until the test ends."""
    noted = OffCpu()
    yield noted
    noted.stop()


def settled(*members: Member, partitions: Iterable[TopicPartition]) -> Callable[[], bool]:
    """True once the members own ``partitions`` between them, each some of every level."""
    wanted = set(partitions)

    def check() -> bool:
        owned = [set(m.events.owned) for m in members]
        levels = [{tp.topic for tp in own} for own in owned]
        return (
            sum(map(len, owned)) == len(wanted)
            and set().union(*owned) == wanted
            and all(len(topics) == LEVELS for topics in levels)
        )

    return check


def stamped_traffic(
    bootstrap: str, topic: str, partitions: int
) -> tuple[list[TopicPartition], Handled, Traffic]:
    """The levels of ``topic``, ``partitions`` each, stamped by the broker (``LogAppendTime``:
    a stall of the test's own producer does not count), 25 records a second to each."""
    create_priority_topics(bootstrap, topic, LEVELS, num_partitions=partitions,
                           topic_configs={"message.timestamp.type": "LogAppendTime"})
    everything = partitions_of(topic, partitions)
    return everything, Handled(), Traffic(bootstrap, everything, rate=25)


# -- partitions added ---------------------------------------------------------------------------


@pytest.mark.parametrize("level", range(LEVELS))
def test_partitions_added_to_a_level_under_traffic_are_handled_and_nothing_stalls(
    bootstrap_servers: str, unique_name: Callable[[str], str], members: Callable[..., Member],
    level: int,
) -> None:
    """A partition added to one level while records flow is handled within
    metadata_max_age_ms + 5 s; every record is handled; no other partition stops for long."""
    run = added_partition_pickup(bootstrap_servers, unique_name("grow"), unique_name("g"),
                                 [level], start_member=members)
    pickup, gaps = run["pickup_s"][level], run["longest_gap_s"]
    print(f"level {level}: new partition handled {pickup:.2f} s after it was added; longest "
          f"gap of the others {max(gaps.values()):.2f} s; {run['records']} records")
    assert pickup <= PICKUP_METADATA_MAX_AGE_MS / 1000 + 5
    assert max(gaps.values()) < 5, gaps


# -- cooperative-sticky -------------------------------------------------------------------------


def test_cooperative_join_revokes_only_moved_partitions_and_kept_ones_keep_flowing(
    bootstrap_servers: str, unique_name: Callable[[str], str], members: Callable[..., Member],
    off_cpu: OffCpu,
) -> None:
    """With CooperativeStickyAssignor, a second member joining revokes from the first only the
    partitions that move to it, and the first keeps handling the partitions it keeps: each of
    their records appended during the join is handled within a second of its append (the
    broker's ``LogAppendTime``, so a stall of the test's own producer does not count), not
    counting the time the whole process was kept off the CPUs meanwhile (OffCpu: at load
    average 30-58 on two cores it was, for 0.5-1.9 s, in every run that failed without it)."""
    topic, group = unique_name("coop"), unique_name("g")
    everything, handled, traffic = stamped_traffic(bootstrap_servers, topic, 4)
    first = members("1", bootstrap_servers, topic, group, handled, **COOPERATIVE,
                    **QUICK_SESSIONS)
    wait_for(lambda: handled.partitions("1") == set(everything), 40, "the first member")
    joined_at, joined_wall = time.monotonic(), time.time()
    second = members("2", bootstrap_servers, topic, group, handled, **COOPERATIVE,
                     **QUICK_SESSIONS)
    wait_for(settled(first, second, partitions=everything), 40, "both members to settle")
    settled_at, settled_wall = time.monotonic(), time.time()
    moved = set(second.events.owned)
    kept = set(first.events.owned)
    wait_for(lambda: handled.partitions("2") == moved, 20, "the second member to handle")
    sent = traffic.stop()
    wait_for(lambda: set(sent) <= set(handled.values()), 30, "every record sent")
    revoked = first.events.since(joined_at, "revoked", "lost")
    waits = {tp: handled.waits(tp, joined_wall, settled_wall) for tp in kept}
    assert all(waits.values()), f"no record of a kept partition appended during the join: {waits}"
    worst = {tp: max(found, key=lambda wait: wait[1]) for tp, found in waits.items()}
    gaps = {tp: handled.longest_gap(tp, joined_at, settled_at) for tp in kept}
    print(f"cooperative join: {len(moved)} moved in {len(revoked)} revokes, settled in "
          f"{settled_at - joined_at:.2f} s; longest wait of a kept partition's record "
          f"{max(wait for _, wait in worst.values()):.2f} s, longest gap "
          f"{max(gaps.values()):.2f} s")
    assert len(moved) == len(kept) == len(everything) // 2
    assert set().union(*revoked) == moved
    assert first.events.since(joined_at, "assigned") == []
    # kafka-python alone stops every partition for the join (1-2.6 s; NO_RECORDS_WHILE_JOINING):
    # a record appended as the join began waited for all of it.
    # The longest wait of each kept partition, once the process's time off the CPUs is out.
    ours = {tp: max(((stamp, wait, off_cpu.between(stamp, stamp + wait)) for stamp, wait in found),
                    key=lambda w: w[1] - w[2])
            for tp, found in waits.items()}
    late = {tp: wait for tp, wait in ours.items() if wait[1] - wait[2] >= 1.0}
    assert not late, (
        "kept partitions' records waited a second or more during the join: "
        + "; ".join(f"{tp.topic[-2:]}/{tp.partition}: appended {stamp - joined_wall:+.2f} s "
                    f"after the join began, handled {wait:.2f} s later ({off:.2f} s of it "
                    f"with the process off the CPUs)"
                    for tp, (stamp, wait, off) in late.items())
        + f"; the join took {settled_at - joined_at:.2f} s; events (s after it began): "
        + "; ".join(f"{name} {kind} {sorted(f'{tp.topic[-2:]}/{tp.partition}' for tp in parts)}"
                    f" at {at - joined_at:+.2f}"
                    for name, member in (("1", first), ("2", second))
                    for at, kind, parts in member.events.calls if at >= joined_at)
    )


def slow_commits(member: Member, delay_s: float) -> list[float]:
    """Hold each of ``member``'s OffsetCommit requests ``delay_s`` on its level's IO thread
    before sending it (a coordinator slow to answer, as under load); returns the times
    (``time.monotonic()``) their answers came."""
    answered: list[float] = []
    for level in member.consumer._levels.values():
        coordinator = level.consumer._coordinator
        send = coordinator._send_offset_commit_request

        async def slow(offsets: Any, send: Any = send, net: Any = coordinator._net) -> Any:
            await net.sleep(delay_s)
            try:
                return await send(offsets)
            finally:
                answered.append(time.monotonic())

        coordinator._send_offset_commit_request = slow
    return answered


def test_slow_commit_answers_do_not_hold_back_handling(
    bootstrap_servers: str, unique_name: Callable[[str], str], members: Callable[..., Member],
) -> None:
    """Each level's commits answered a second late: the executor's periodic commits go on
    (in the background), and every record is still handled within a second of its append.
    A commit waited for on the polling thread held polling for all three levels' answers
    (3 s here; 0.3-1.5 s under load, the cooperative-join flake: docs/rebalancing.md)."""
    topic = unique_name("slowcommit")
    everything, handled, traffic = stamped_traffic(bootstrap_servers, topic, 2)
    member = members("1", bootstrap_servers, topic, unique_name("g"), handled, **QUICK_SESSIONS)
    wait_for(lambda: handled.partitions("1") == set(everything), 40, "the member")
    answered = slow_commits(member, 1.0)
    commits_before = member.executor.stats().commits
    slowed_wall = time.time()
    wait_for(lambda: len(answered) >= 2 * LEVELS, 40, "two slow commits of each level")
    until_wall = time.time()
    sent = traffic.stop()
    wait_for(lambda: set(sent) <= set(handled.values()), 30, "every record sent")
    waits = {tp: handled.waits(tp, slowed_wall, until_wall) for tp in everything}
    assert all(waits.values()), f"no record appended while commits were slow: {waits}"
    worst = {tp: max(wait for _, wait in found) for tp, found in waits.items()}
    commits = member.executor.stats().commits - commits_before
    print(f"slow commits: {commits} commits answered in {until_wall - slowed_wall:.2f} s; "
          f"longest wait of a record {max(worst.values()):.2f} s")
    assert commits >= 1
    late = {f"{tp.topic[-2:]}/{tp.partition}": round(wait, 2)
            for tp, wait in worst.items() if wait >= 1.0}
    assert not late, f"records waited a second or more while commits were slow: {late}"


# -- static membership --------------------------------------------------------------------------


def test_a_static_member_restarted_within_the_session_gets_its_partitions_back_silently(
    bootstrap_servers: str, unique_name: Callable[[str], str], members: Callable[..., Member],
) -> None:
    """Members with group_instance_id: one closed (no LeaveGroup) and restarted within
    session_timeout_ms gets the same partitions back, and the other sees no rebalance."""
    topic, group = unique_name("static"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=2)
    everything = partitions_of(topic, 2)
    handled = Handled()
    traffic = Traffic(bootstrap_servers, everything, rate=20)
    static = {"session_timeout_ms": 20_000, "heartbeat_interval_ms": 1_000}
    a = members("a", bootstrap_servers, topic, group, handled, group_instance_id="a", **static)
    b = members("b", bootstrap_servers, topic, group, handled, group_instance_id="b", **static)
    wait_for(settled(a, b, partitions=everything), 40, "both members to settle")
    wait_for(lambda: handled.partitions() == set(everything), 20, "every partition handled")
    owned_by_a = set(a.events.owned)
    quiet_from = time.monotonic()
    a.stop()
    again = members("a2", bootstrap_servers, topic, group, handled, group_instance_id="a",
                    **static)
    wait_for(lambda: again.events.owned == owned_by_a, 15, "the restarted member's partitions")
    back_at = time.monotonic()
    wait_for(lambda: handled.partitions("a2") == owned_by_a, 15, "the restarted member to handle")
    sent = traffic.stop()
    wait_for(lambda: set(sent) <= set(handled.values()), 30, "every record sent")
    print(f"static restart: partitions back {back_at - quiet_from:.2f} s after the stop began")
    assert b.events.since(quiet_from, "revoked", "lost", "assigned") == []
    # Eager revokes the (empty) assignment before a first join: that is no rebalance.
    assert [p for p in again.events.since(0, "revoked", "lost") if p] == []


# -- revoke-time commit -------------------------------------------------------------------------


@pytest.mark.parametrize("revoke_commit", [True, False], ids=["committed", "commit-disabled"])
def test_the_revoke_time_commit_bounds_duplicates_of_a_join(
    bootstrap_servers: str, unique_name: Callable[[str], str], members: Callable[..., Member],
    revoke_commit: bool,
) -> None:
    """With no periodic commit, a member joining makes the first replay at most the records in
    flight when it revoked; without the revoke-time commit it replays what it handled."""
    topic, group = unique_name("dup"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, LEVELS, num_partitions=2)
    everything = partitions_of(topic, 2)
    traffic = Traffic(bootstrap_servers, everything, rate=50)
    handled = Handled()
    first = members("1", bootstrap_servers, topic, group, handled, delay_s=0.002,
                    commit_interval_ms=600_000, **QUICK_SESSIONS)
    if not revoke_commit:
        # The switch: the revoke hook's commit_async answers without committing anything.
        first.consumer.commit_async = lambda offsets=None, callback=None: Future().success(None)
    wait_for(lambda: handled.partitions("1") == set(everything), 40, "the first member")
    second = members("2", bootstrap_servers, topic, group, handled, delay_s=0.002,
                     commit_interval_ms=600_000, **QUICK_SESSIONS)
    wait_for(settled(first, second, partitions=everything), 40, "both members to settle")
    moved = set(second.events.owned)
    wait_for(lambda: handled.partitions("2") == moved, 20, "the second to handle")
    sent = traffic.stop()
    wait_for(lambda: set(sent) <= set(handled.values()), 30, "every record sent")
    duplicates = sum(n - 1 for n in handled.values().values())
    # What the first member handled of them: all is replayed unless the revoke committed.
    replayable = sum(1 for _, member, tp, _ in handled.log if member == "1" and tp in moved)
    print(f"revoke commit {'on' if revoke_commit else 'off'}: {duplicates} duplicates in one "
          f"join; the first member had handled {replayable} records of the partitions that "
          f"moved; {len(sent)} records")
    if revoke_commit:
        # Only records done above the watermark (out of order across lanes) may come again.
        assert duplicates <= first.executor.config.max_in_flight_per_partition * len(moved)
        assert duplicates <= replayable // 10
    else:
        assert duplicates >= replayable
