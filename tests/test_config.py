"""PriorityConfig and the mapping of Java-style keys (pure: no broker)."""

from __future__ import annotations

import pytest

from priority_kafka import ConfigError, LinearDistributor, PriorityConfig
from priority_kafka.config import normalize_keys, split_configs


def test_dotted_keys_become_python_names_without_touching_the_input():
    """normalize_keys maps max.poll.records to max_poll_records and copies the mapping."""
    given = {"max.poll.records": 50, "group.id": "g", "client_id": "c"}
    assert normalize_keys(given) == {"max_poll_records": 50, "group_id": "g", "client_id": "c"}
    assert given == {"max.poll.records": 50, "group.id": "g", "client_id": "c"}


def test_a_key_given_in_both_spellings_is_rejected():
    """Two spellings of one key are ambiguous."""
    with pytest.raises(ConfigError, match="'max_poll_records' is given twice"):
        normalize_keys({"max_poll_records": 50, "max.poll.records": 60})


def test_split_separates_priority_settings_from_kafka_python_ones():
    """Priority settings go to PriorityConfig; everything else stays for KafkaConsumer."""
    config, rest = split_configs(
        {"max.priority": 3, "max.poll.records": 50, "group.id": "g", "fetch_max_wait_ms": 100}
    )
    assert config == PriorityConfig(max_priority=3, max_poll_records=50)
    assert rest == {"group_id": "g", "fetch_max_wait_ms": 100}
    assert config.reserved_quotas() == {2: 29, 1: 14, 0: 7}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "'max_priority' is required"),
        ({"max_priority": 0}, "'max_priority' must be at least 1 \\(got 0\\)"),
        ({"max_priority": 1001}, "'max_priority' must be at most 1000 \\(got 1001\\)"),
        (
            {"max_priority": 3, "max_poll_records": 2**63},
            "'max_poll_records' must be at most 1000000 \\(got 9223372036854775808\\)",
        ),
        (
            {"max_priority": 3, "max_poll_history_window_size": 10**9},
            "'max_poll_history_window_size' must be at most 100000 \\(got 1000000000\\)",
        ),
        ({"max_priority": 3, "max_poll_records": 6}, r"at least 7 for 3 priority levels \(got 6\)"),
        (
            {"max_priority": 3, "max_poll_history_window_size": 2},
            "'min_poll_window_maxout_threshold' must be at most max_poll_history_window_size",
        ),
        ({"max_priority": 3, "max_poll_records_distributor": 5}, "must be a callable"),
        (
            {"max_priority": 2, "max_poll_records_distributor": lambda n, m: {0: m}},
            "levels",
        ),
    ],
)
def test_bad_settings_name_the_setting(settings, message):
    """Each invalid setting fails with a ConfigError (a ValueError) that names it."""
    with pytest.raises(ValueError, match=message):
        split_configs(settings)


def test_any_distributor_plugs_in():
    """A built-in or user distributor decides the reserved split."""
    config = PriorityConfig(max_priority=3, max_poll_records=60,
                            max_poll_records_distributor=LinearDistributor())
    assert config.reserved_quotas() == {2: 30, 1: 20, 0: 10}
    custom = PriorityConfig(max_priority=2, max_poll_records=10,
                            max_poll_records_distributor=lambda n, m: {0: 1, 1: m - 1})
    assert custom.reserved_quotas() == {1: 9, 0: 1}
