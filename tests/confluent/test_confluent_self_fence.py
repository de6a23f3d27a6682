"""A static level member fenced by its own rejoin (librdkafka issue #3437) is renewed; a fence
by another consumer stays fatal (priority_kafka.confluent._self_fence)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message

from priority_kafka.confluent import _self_fence
from priority_kafka.confluent._self_fence import SelfFences

FENCED = ("Fatal error: Broker: Static consumer fenced by other consumer with same "
          "group.instance.id: Fatal consumer error: Broker: Static consumer fenced by other "
          "consumer with same group.instance.id")
TIMED_OUT = ("Consumer group session timed out (in join-state steady) after 6031 ms without a "
             "successful response from the group coordinator (broker 1, last error was "
             "Success): revoking assignment and rejoining group")


class Lines:
    """A logger that keeps what it is given."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def log(self, level: int, fmt: str, *args: Any) -> None:
        self.lines.append((level, fmt % args))


def fatal_event() -> Message:
    return Message(error=KafkaError(KafkaError._FATAL, FENCED, fatal=True))


def test_only_static_members_of_the_classic_protocol_are_watched() -> None:
    def renew(level: int, reason: str) -> None:
        raise AssertionError("not called")

    target = Lines()
    assert SelfFences.of({"group.instance.id": "a"}, renew).logger(0, target) is not target
    assert SelfFences.of({}, renew).logger(0, target) is target
    kip_848 = {"group.instance.id": "a", "group.protocol": "consumer"}
    assert SelfFences.of(kip_848, renew).logger(0, target) is target


def test_a_fence_right_after_the_levels_session_timed_out_renews_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fatal line in the same moment as level 1's session timeout: level 1 is renewed and
    its fatal event dropped; level 0's fence (no session timeout of its own) stays fatal.
    Level 1 fencing itself again 34 s later (the soak: its renewed consumer's session timed
    out again under faults) is renewed again, up to 5 times in 5 minutes; the sixth is a storm
    and stays fatal, until the window has passed. Every line reaches the logger."""
    clock = [100.0]
    monkeypatch.setattr(_self_fence.time, "monotonic", lambda: clock[0])
    renewed: list[tuple[int, str]] = []
    fences = SelfFences.of({"group.instance.id": "m0"}, lambda lv, why: renewed.append((lv, why)))
    target = Lines()
    level_0, level_1 = fences.logger(0, target), fences.logger(1, target)

    def self_fence() -> None:
        level_1.log(logging.WARNING, "%s [%s] %s", "SESSTMOUT", "rdkafka#consumer-2", TIMED_OUT)
        level_1.log(logging.CRITICAL, "%s [%s] %s", "FATAL", "rdkafka#consumer-2", FENCED)

    self_fence()
    level_0.log(logging.CRITICAL, "%s [%s] %s", "FATAL", "rdkafka#consumer-1", FENCED)
    assert [lv for lv, _ in renewed] == [1] and "librdkafka issue #3437" in renewed[0][1]
    other = Message(error=KafkaError(KafkaError._TRANSPORT, "down"))
    events = [fatal_event(), other, fatal_event()]
    kept = fences.unfenced(events)
    assert kept == events[1:] and fences.pending == 0  # one dropped, level 0's kept
    for _ in range(4):
        clock[0] += 34.0
        self_fence()
    assert len(renewed) == 5 and fences.pending == 4
    fences.pending = 0
    clock[0] += 34.0
    self_fence()  # the sixth in 5 minutes: fatal
    assert len(renewed) == 5 and fences.unfenced(events) == events
    clock[0] += 300.0
    self_fence()
    assert len(renewed) == 6
    assert len(target.lines) == 15


def test_a_fence_long_after_the_session_timed_out_is_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    renewed: list[int] = []
    fences = SelfFences.of({"group.instance.id": "m0"}, lambda lv, why: renewed.append(lv))
    clock = [100.0]
    monkeypatch.setattr(_self_fence.time, "monotonic", lambda: clock[0])
    level = fences.logger(2, Lines())
    level.log(logging.WARNING, "%s [%s] %s", "SESSTMOUT", "c", TIMED_OUT)
    clock[0] += 31.0
    level.log(logging.CRITICAL, "%s [%s] %s", "FATAL", "c", FENCED)
    assert renewed == [] and fences.pending == 0


def test_a_static_priority_consumer_renews_a_level_whose_commit_read_is_never_retried() -> None:
    """librdkafka #5586 on a PriorityConsumer used without the executor: a static member's
    level whose read of its commits failed as a whole (the coordinator had just come back) is
    renewed by the consumer itself at its next consume(), the event returned as it came; a
    read that failed for some partitions only (librdkafka retries those) renews nothing."""
    from priority_kafka.confluent import PriorityConsumer

    consumer = PriorityConsumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "orders-g",
                                 "group.instance.id": "m0", "max.priority": 3})
    try:
        unretried = KafkaError(KafkaError.NOT_COORDINATOR, 'Failed to fetch committed offsets '
                               'for 0 partition(s) in group "orders-g-2": Broker: Not '
                               'coordinator')
        retried = KafkaError(KafkaError.NOT_COORDINATOR, 'Failed to fetch committed offsets '
                             'for 2 partition(s) in group "orders-g-1": Broker: Not '
                             'coordinator')
        events = [Message(error=retried), Message(error=unretried)]
        consumer._check_fatal(events, consumer._fatal_config)
        assert [m.error() for m in events] == [retried, unretried]
        assert [(lv.level, "issue #5586" in why) for lv, why in consumer._renewals.due.items()
                ] == [(2, True)]
    finally:
        consumer.close()
