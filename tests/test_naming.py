"""Tests for priority_kafka.naming: priority topic names, per-level groups and patterns."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from priority_kafka.errors import ConfigError
from priority_kafka.naming import (
    MAX_TOPIC_LENGTH,
    level_group_id,
    level_pattern,
    priority_topic,
    priority_topics,
    split_priority_topic,
)

LEGAL_CHARS = "abcxyzABZ0189._-"
topics = st.text(alphabet=LEGAL_CHARS, min_size=1, max_size=40)
levels = st.integers(min_value=0, max_value=999)  # naming.MAX_PRIORITY - 1


def test_priority_topic_appends_the_level():
    """A priority topic is the logical topic, a dash and the level."""
    assert priority_topic("orders", 2) == "orders-2"


def test_priority_topics_lists_every_level_highest_first():
    """priority_topics gives one topic per level, from the highest priority down to 0."""
    assert priority_topics("orders", 3) == ["orders-2", "orders-1", "orders-0"]


def test_single_level_has_one_topic():
    """With max_priority 1 the only priority topic is level 0."""
    assert priority_topics("orders", 1) == ["orders-0"]


@given(topics, levels)
def test_split_inverts_priority_topic(topic, level):
    """split_priority_topic recovers the logical topic and level, even if the topic has dashes."""
    assert split_priority_topic(priority_topic(topic, level)) == (topic, level)


@given(topics, st.integers(min_value=1, max_value=50))
def test_priority_topics_agree_with_priority_topic(topic, max_priority):
    """Each listed topic is priority_topic of its level, highest level first."""
    expected = [priority_topic(topic, level) for level in range(max_priority - 1, -1, -1)]
    assert priority_topics(topic, max_priority) == expected


def test_level_group_id_appends_the_level():
    """The consumer group of a level is the group id, a dash and the level."""
    assert level_group_id("g", 1) == "g-1"


def test_level_pattern_wraps_alternatives():
    """An alternation is grouped so the level suffix applies to every alternative."""
    assert level_pattern("orders|pay.*", 2) == "(?:orders|pay.*)-2$"


@pytest.mark.parametrize(
    ("topic", "matches"),
    [
        ("orders-2", True),
        ("payments-2", True),
        ("pay-2", True),
        ("orders-1", False),
        ("orders-20", False),
        ("orders-2-archive", False),
        ("old-orders-2", False),
    ],
)
def test_level_pattern_matches_only_that_levels_topics(topic, matches):
    """Under kafka-python's re.match, the level pattern matches exactly that level's topics."""
    assert bool(re.match(level_pattern("orders|pay.*", 2), topic)) is matches


@given(st.sampled_from(["orders", "pay.*", "a|b", "x[0-9]+", "orders|pay.*"]), topics, levels)
def test_level_pattern_matches_iff_logical_topic_fully_matches(pattern, topic, level):
    """A priority topic matches the level pattern exactly when its logical topic matches fully."""
    expected = re.fullmatch(pattern, topic) is not None
    matched = re.match(level_pattern(pattern, level), priority_topic(topic, level)) is not None
    assert matched is expected


def test_longest_legal_topic_is_accepted():
    """A topic whose priority topic is exactly Kafka's 249-character limit is accepted."""
    topic = "t" * (MAX_TOPIC_LENGTH - len("-10"))
    assert len(priority_topic(topic, 10)) == MAX_TOPIC_LENGTH


@pytest.mark.parametrize("topic", ["", "bad topic", "orders/2", "é", 42, None])
def test_illegal_topic_is_rejected_naming_it(topic):
    """A topic that is empty, not a str, or has characters Kafka forbids is a ConfigError."""
    with pytest.raises(ConfigError, match=re.escape(repr(topic))):
        priority_topic(topic, 0)


def test_topic_too_long_for_its_highest_level_is_rejected():
    """A topic whose highest-level priority topic exceeds 249 characters is a ConfigError."""
    topic = "t" * (MAX_TOPIC_LENGTH - len("-9"))
    assert priority_topics(topic, 10)[-1] == f"{topic}-0"
    with pytest.raises(ConfigError, match="250 characters"):
        priority_topics(topic, 11)


@pytest.mark.parametrize("level", [-1, True, 1.0, "2", None])
def test_bad_level_is_rejected_naming_it(level):
    """A level that is negative or not an int is a ConfigError naming the value."""
    for call in (priority_topic, level_group_id):
        with pytest.raises(ConfigError, match=rf"'level'.*\(got {re.escape(repr(level))}\)"):
            call("orders", level)
    with pytest.raises(ConfigError, match=re.escape(repr(level))):
        level_pattern("orders", level)


@pytest.mark.parametrize("max_priority", [0, -3, False, 2.0])
def test_bad_max_priority_is_rejected_naming_it(max_priority):
    """max_priority must be an int of at least 1."""
    with pytest.raises(ConfigError, match=rf"'max_priority'.*\(got {max_priority!r}\)"):
        priority_topics("orders", max_priority)


@pytest.mark.parametrize(
    "name",
    [
        "orders",
        "orders-",
        "-2",
        "orders-02",
        "orders-x",
        "orders-+1",
        "bad name-1",
        "x" * 248 + "-1",
        7,
    ],
)
def test_split_rejects_names_that_are_not_priority_topics(name):
    """Only names priority_topic can produce split; anything else is a ConfigError naming it."""
    with pytest.raises(ConfigError, match=rf"'name'.*\(got {re.escape(repr(name))}\)"):
        split_priority_topic(name)


@pytest.mark.parametrize("group_id", ["", None, 3])
def test_bad_group_id_is_rejected_naming_it(group_id):
    """A group id must be a non-empty str."""
    with pytest.raises(ConfigError, match=rf"'group_id'.*\(got {re.escape(repr(group_id))}\)"):
        level_group_id(group_id, 0)


@pytest.mark.parametrize("pattern", ["", "(", "a)|(b", "(?x)orders", None])
def test_unusable_pattern_is_rejected_naming_it(pattern):
    """An empty, non-str or invalid regex (or one that cannot be wrapped) is a ConfigError."""
    with pytest.raises(ConfigError, match=rf"'pattern'.*\(got {re.escape(repr(pattern))}\)"):
        level_pattern(pattern, 0)
