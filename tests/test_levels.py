"""LevelRouter: the level of a topic, grouping by level and per-level ids, for both key styles;
PriorityFront and capacity_burst: what both front-ends take from their settings."""

from __future__ import annotations

from collections import namedtuple

import pytest

from priority_kafka._levels import LevelRouter, PriorityFront, capacity_burst
from priority_kafka.config import PriorityConfig
from priority_kafka.errors import ConfigError

TP = namedtuple("TP", "topic partition")


def test_levels_are_highest_first():
    assert list(LevelRouter(3).highest_first) == [2, 1, 0]


def test_level_of_a_priority_topic_and_the_one_error_naming_the_topic():
    router = LevelRouter(3)
    assert router.level_of("orders-2") == 2
    assert router.level_of("my-orders-0") == 0
    with pytest.raises(ConfigError, match=r"Topic 'orders-3' has priority 3, outside \[0, 3\)"):
        router.level_of("orders-3")
    with pytest.raises(ConfigError, match="orders"):
        router.level_of("orders")


def test_group_keeps_the_given_order_within_a_level_and_checks_every_partition_first():
    router = LevelRouter(3)
    partitions = [TP("a-0", 1), TP("a-2", 0), TP("a-0", 0), TP("b-2", 3)]
    assert router.group(partitions) == {
        0: [TP("a-0", 1), TP("a-0", 0)], 2: [TP("a-2", 0), TP("b-2", 3)]
    }
    calls = []
    with pytest.raises(ConfigError, match="a-5"):
        router.gather(
            [TP("a-0", 0), TP("a-5", 0)], lambda level, group: calls.append(level) or group,
            key=tuple,
        )
    assert calls == []  # nothing ran for the good partition either


def test_group_reads_the_topic_through_the_given_function():
    assert LevelRouter(2).group(["x-1", "x-0", "y-1"], topic=str) == {1: ["x-1", "y-1"], 0: ["x-0"]}


def test_gather_returns_each_levels_results_in_the_order_given():
    router = LevelRouter(3)
    partitions = [TP("a-0", 0), TP("a-2", 0), TP("a-1", 5), TP("a-2", 1)]
    calls = []

    def call(level, group):
        calls.append((level, group))
        return [TP(tp.topic, tp.partition + 100) for tp in reversed(group)]

    result = router.gather(partitions, call, key=lambda tp: (tp.topic, tp.partition % 100))
    assert result == [TP("a-0", 100), TP("a-2", 100), TP("a-1", 105), TP("a-2", 101)]
    assert sorted(level for level, _ in calls) == [0, 1, 2]


@pytest.mark.parametrize(
    ("style", "group", "ids"),
    [
        ("kafka-python", "group_id", ("client_id", "group_instance_id")),
        ("librdkafka", "group.id", ("client.id", "group.instance.id")),
    ],
)
def test_each_level_gets_its_own_group_and_ids_in_either_key_style(style, group, ids):
    router = LevelRouter(3)
    given = {group: "billing", ids[0]: "app", ids[1]: "host-1", "other": 1}
    level = router.level_config(given, 2, style, defaults={"other": 0, "default": 5})
    assert level == {
        group: "billing-2", ids[0]: "app-2", ids[1]: "host-1-2", "other": 1, "default": 5
    }
    assert given == {group: "billing", ids[0]: "app", ids[1]: "host-1", "other": 1}
    assert router.level_config({group: None}, 0, style) == {group: None}  # no group stays none


def test_a_bad_group_id_is_rejected_naming_it():
    with pytest.raises(ConfigError, match="'group_id' must be a non-empty str"):
        LevelRouter(2).level_config({"group_id": ""}, 0, "kafka-python")


@pytest.mark.parametrize("bad", [0, 1001, True, "3"])
def test_a_bad_max_priority_is_rejected_naming_it(bad):
    with pytest.raises(ConfigError, match="'max_priority'"):
        LevelRouter(bad)


def test_repr_names_the_levels():
    assert repr(LevelRouter(3)) == "LevelRouter(max_priority=3)"


class _Front(PriorityFront):
    """The least a front-end sets for PriorityFront's properties."""

    def __init__(self, config: PriorityConfig) -> None:
        self._config = config
        self._reserved = capacity_burst(config).reserved


def test_priority_front_shows_the_settings_and_a_copy_of_the_reserved_split():
    """Both PriorityConsumers' max_priority, config and reserved_quotas come from one place;
    changing the returned quotas changes nothing."""
    config = PriorityConfig(max_priority=3, max_poll_records=100)
    front = _Front(config)
    assert front.max_priority == 3 and front.config is config
    quotas = front.reserved_quotas
    assert list(quotas) == [2, 1, 0] and sum(quotas.values()) == 100
    quotas[2] = 0
    assert front.reserved_quotas[2] > 0


def test_capacity_burst_follows_the_windows_of_the_settings():
    """Each consumer gets a fresh CapacityBurst with its config's split, window and threshold."""
    config = PriorityConfig(
        max_priority=2, max_poll_records=10, max_poll_history_window_size=3,
        min_poll_window_maxout_threshold=2,
    )
    burst = capacity_burst(config)
    assert burst.reserved == config.reserved_quotas()
    assert (burst.window_size, burst.maxout_threshold) == (3, 2)
    assert capacity_burst(config) is not burst
