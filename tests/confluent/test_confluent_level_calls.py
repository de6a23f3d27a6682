"""The confluent PriorityConsumer's partition-level calls (confluent/_calls.py's LevelCalls, which
the front end holds): each goes to the level that owns the partition, and a bad call is refused
naming what is wrong before any level is called (pure: recording level consumers, no broker)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import TopicPartition

from priority_kafka._levels import LevelRouter
from priority_kafka.confluent import InvalidArgError, PriorityConsumer
from priority_kafka.confluent._calls import LevelCalls
from priority_kafka.errors import IllegalStateError


class _Recording:
    """A level's consumer that records the calls made on it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self.calls.append((name, args or kwargs or ()))


class _Level:
    def __init__(self, level: int) -> None:
        self.level = level
        self.consumer = _Recording()


def _calls(closed: list[bool] | None = None) -> tuple[LevelCalls, dict[int, _Level]]:
    by_level = {level: _Level(level) for level in (2, 1, 0)}

    def check_open() -> None:
        if closed:
            raise IllegalStateError("closed")

    return LevelCalls(by_level, LevelRouter(3), check_open), by_level  # type: ignore[arg-type]


def test_assign_goes_to_each_level_and_a_callback_assigns_only_its_own() -> None:
    """Outside a rebalance callback, each level gets its partitions and a level given none is
    unassigned; inside one, only the rebalancing level may be assigned (InvalidArgError
    naming the others' levels); while levels are renewed, the partitions are checked and
    nothing is called."""
    calls, levels = _calls()
    calls.assign([TopicPartition("orders-2", 0), TopicPartition("orders-0", 1)], None, False)
    assert levels[2].consumer.calls == [("assign", ([TopicPartition("orders-2", 0)],))]
    assert levels[1].consumer.calls == [("unassign", ())]
    assert levels[0].consumer.calls == [("assign", ([TopicPartition("orders-0", 1)],))]
    calls, levels = _calls()
    with pytest.raises(InvalidArgError, match=r"a rebalance callback of level 1 may assign only "
                                              r"its level's partitions \(got partitions of "
                                              r"level\(s\) \[2\]\)"):
        calls.assign([TopicPartition("orders-2", 0)], levels[1], False)  # type: ignore[arg-type]
    calls.unassign(levels[1], False)  # type: ignore[arg-type]
    calls.assign([], levels[1], True)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgError, match=r"'orders-5' has priority 5, outside \[0, 3\)"):
        calls.assign([TopicPartition("orders-5", 0)], None, True)
    assert [lv.consumer.calls for lv in levels.values()] == [[], [("unassign", ())], []]


def test_a_partition_of_no_level_or_a_closed_front_end_calls_no_level() -> None:
    """``each`` checks every partition before any level is called; ``level`` names the levels
    for a number that is not one of them (a bool is no level); a closed front end refuses."""
    calls, levels = _calls()
    with pytest.raises(InvalidArgError, match="orders-3"):
        calls.each("pause", [TopicPartition("orders-2", 0), TopicPartition("orders-3", 0)])
    calls.each("store_offsets", [TopicPartition("orders-1", 0, 5)], keyword="offsets")
    assert [lv.consumer.calls for lv in levels.values()] == [
        [], [("store_offsets", {"offsets": [TopicPartition("orders-1", 0, 5)]})], []
    ]
    for bad in (3, True, "2"):
        with pytest.raises(InvalidArgError, match=r"must be one of this consumer's levels "
                                                  r"\[0, 1, 2\] \(got"):
            calls.level(bad)
    assert calls.level(2) is levels[2]
    closed, _ = _calls(closed=[True])
    with pytest.raises(IllegalStateError):
        closed.level_of("orders-2")


def test_the_front_end_routes_through_its_level_calls() -> None:
    """The PriorityConsumer's own calls refuse as its LevelCalls does, and once closed say so."""
    consumer = PriorityConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                                 "max.priority": 3})
    try:
        with pytest.raises(InvalidArgError, match="exactly one"):
            consumer.store_offsets()
        with pytest.raises(InvalidArgError, match=r"got 7"):
            consumer.renew_level(7)
        with pytest.raises(InvalidArgError, match="orders-4"):
            consumer.committed([TopicPartition("orders-4", 0)])
        assert consumer.priority_of("orders-1") == 1
        assert consumer.levels.level_of("orders-2") == 2
    finally:
        consumer.close()
    with pytest.raises(IllegalStateError, match="closed"):
        consumer.seek(TopicPartition("orders-2", 0, 0))
