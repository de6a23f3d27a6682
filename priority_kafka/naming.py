"""Names of priority topics and per-level consumer groups (pure: no I/O, no Kafka).

Logical topic ``orders`` with ``max_priority=3`` is the three Kafka topics ``orders-0``,
``orders-1`` and ``orders-2``; level 0 is the lowest priority. The consumer of level ``i`` in
group ``g`` joins group ``g-i``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from priority_kafka._checks import MAX_PRIORITY, check_int, shown
from priority_kafka.errors import ConfigError, MissingTopicsError

__all__ = [
    "check_levels",
    "check_subscription",
    "common_levels",
    "existing_levels",
    "level_group_id",
    "level_pattern",
    "missing_topics_message",
    "pattern_levels",
    "priority_topic",
    "priority_topics",
    "split_priority_topic",
]

# The highest level any name may carry (levels are 0 .. MAX_PRIORITY - 1).
_MAX_LEVEL = MAX_PRIORITY - 1
# Kafka's limit on topic names (Topic.MAX_NAME_LENGTH) and its legal characters.
MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_LEVEL_SUFFIX = re.compile(r"(?P<topic>.+)-(?P<level>0|[1-9][0-9]*)")


def _check_topic(topic: object, highest_level: int) -> str:
    """Return ``topic`` if it is legal and ``<topic>-<highest_level>`` fits Kafka's limit."""
    if not isinstance(topic, str):
        raise ConfigError(f"'topic' must be a str (got {shown(topic)}).")
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise ConfigError(
            f"'topic' must be non-empty and use only the characters a-z A-Z 0-9 . _ - "
            f"(got {shown(topic)})."
        )
    longest = len(topic) + 1 + len(str(highest_level))
    if longest > MAX_TOPIC_LENGTH:
        raise ConfigError(
            f"'topic' is too long: the priority topic {topic!r}-{highest_level} would have "
            f"{longest} characters, more than Kafka's {MAX_TOPIC_LENGTH} (got {shown(topic)})."
        )
    return topic


def priority_topic(topic: str, level: int) -> str:
    """Return the Kafka topic holding ``topic``'s messages of priority ``level``: ``orders-2``."""
    level = check_int("level", level, minimum=0, maximum=_MAX_LEVEL)
    return f"{_check_topic(topic, level)}-{level}"


def priority_topics(topic: str, max_priority: int) -> list[str]:
    """Return the ``max_priority`` Kafka topics of ``topic``, highest priority level first."""
    max_priority = check_int("max_priority", max_priority, minimum=1, maximum=MAX_PRIORITY)
    _check_topic(topic, max_priority - 1)
    return [f"{topic}-{level}" for level in reversed(range(max_priority))]


def split_priority_topic(name: str) -> tuple[str, int]:
    """Return ``(logical topic, level)`` of a priority topic: ``orders-2`` -> ``("orders", 2)``.

    The inverse of :func:`priority_topic`: only names it can produce are accepted, so a level
    with a leading zero (``orders-02``) is rejected rather than read as ``("orders", 2)``.
    """
    legal = isinstance(name, str) and len(name) <= MAX_TOPIC_LENGTH
    match = _LEVEL_SUFFIX.fullmatch(name) if legal else None
    if (
        match is None
        or not _LEGAL_TOPIC.fullmatch(name)
        or len(match["level"]) > len(str(_MAX_LEVEL))
    ):
        raise ConfigError(
            f"'name' must be a priority topic '<topic>-<level>' such as 'orders-2', at most "
            f"{MAX_TOPIC_LENGTH} legal characters, level 0..{_MAX_LEVEL} (got {shown(name)})."
        )
    return match["topic"], int(match["level"])


def level_group_id(group_id: str, level: int) -> str:
    """Return the consumer group of priority ``level`` within ``group_id``: ``g``, 1 -> ``g-1``."""
    if not isinstance(group_id, str) or not group_id:
        raise ConfigError(f"'group_id' must be a non-empty str (got {shown(group_id)}).")
    return f"{group_id}-{check_int('level', level, minimum=0, maximum=_MAX_LEVEL)}"


def level_pattern(pattern: str, level: int) -> str:
    """Turn a subscription regex over logical topics into one over that level's priority topics.

    ``"orders|pay.*"`` at level 2 gives ``"(?:orders|pay.*)-2$"``. The pattern must match the
    whole logical topic name (as in Java's ``subscribe(Pattern)``): kafka-python tests topics
    with ``re.match``, which anchors only the start, so the result anchors the end; otherwise
    level 2's pattern would also match ``orders-20`` or ``orders-2-archive``.
    """
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"'pattern' must be a non-empty str (got {shown(pattern)}).")
    level = check_int("level", level, minimum=0, maximum=_MAX_LEVEL)
    result = f"(?:{pattern})-{level}$"
    for regex in (pattern, result):
        try:
            re.compile(regex)
        # re raises OverflowError for a huge repeat count (a{99999999999}), RecursionError for
        # very deep nesting.
        except (re.error, OverflowError, RecursionError) as exc:
            raise ConfigError(
                f"'pattern' is not a usable regex: {exc} (got {shown(pattern)})."
            ) from exc
    return result


def existing_levels(topic: str, names: Iterable[str]) -> list[int]:
    """The levels of logical ``topic`` among the Kafka topic ``names``, ascending
    (``"orders"`` among ``{"orders-1", "orders-0", "other"}`` -> ``[0, 1]``)."""
    levels = []
    for name in names:
        try:
            logical, level = split_priority_topic(name)
        except ConfigError:
            continue
        if logical == topic:
            levels.append(level)
    return sorted(levels)


def missing_topics_message(topic: str, missing: Iterable[str], max_priority: int) -> str:
    """One line saying the priority topics ``missing`` do not exist, and how to create them."""
    return (
        f"topics {', '.join(missing)} do not exist; create them with `priority-kafka topics "
        f"create {topic} --max-priority {max_priority}` (or priority_kafka."
        f"create_priority_topics(servers, {topic!r}, {max_priority}))"
    )


def common_levels(
    topics: Iterable[str], names: Iterable[str], max_priority: int | None = None,
    setting: str = "max_priority", advice: str = "",
) -> int:
    """The number of levels every one of the logical ``topics`` has among ``names``
    (:func:`check_levels` for each); :class:`~priority_kafka.ConfigError` when they differ,
    ending with ``advice`` (what the caller can do instead)."""
    names = set(names)
    found = {topic: check_levels(topic, names, max_priority, setting) for topic in topics}
    if len(set(found.values())) != 1:
        raise ConfigError(
            "the topics have different numbers of levels on the broker ("
            + ", ".join(f"{topic}: {n}" for topic, n in found.items()) + f"); {advice}."
        )
    return next(iter(found.values()))


def check_levels(
    topic: str, names: Iterable[str], max_priority: int | None = None,
    setting: str = "max_priority",
) -> int:
    """The number of levels logical ``topic`` has among the Kafka topic ``names`` (as the
    broker lists them), checked against ``max_priority`` when given.

    Raises :class:`~priority_kafka.MissingTopicsError` when no level of ``topic`` exists, or
    some level below ``max_priority`` (without it: below the highest existing level) does not,
    naming them; and :class:`~priority_kafka.ConfigError` when a level at or above
    ``max_priority`` exists, naming the topics that would never be read. ``setting`` is the
    name the caller gave ``max_priority`` (``max.priority`` on confluent-kafka).
    """
    levels = existing_levels(_check_topic(topic, 0), names)
    if max_priority is not None:
        max_priority = check_int(setting, max_priority, minimum=1, maximum=MAX_PRIORITY)
        unread = [f"{topic}-{level}" for level in levels if level >= max_priority]
        if unread:
            raise ConfigError(
                f"{', '.join(unread)} {'exists' if len(unread) == 1 else 'exist'} but "
                f"{setting}={max_priority} reads only {topic}-0..{topic}-{max_priority - 1}, "
                f"so {'its' if len(unread) == 1 else 'their'} records would never be read; "
                f"give {setting}={levels[-1] + 1} or leave it out to read every level the "
                f"broker has."
            )
    elif not levels:
        raise MissingTopicsError(
            f"topic {topic!r} has no priority topics ({topic}-0, {topic}-1, ...) on the "
            f"broker; create them with `priority-kafka topics create {topic} --max-priority N` "
            f"(or priority_kafka.create_priority_topics(servers, {topic!r}, N))"
        )
    wanted = max_priority if max_priority is not None else levels[-1] + 1
    present = set(levels)
    missing = [f"{topic}-{level}" for level in range(wanted) if level not in present]
    if missing:
        raise MissingTopicsError(missing_topics_message(topic, missing, wanted))
    return wanted


def pattern_levels(
    pattern: str, names: Iterable[str], max_priority: int, setting: str = "max_priority"
) -> None:
    """Raise ConfigError naming the topics at or above ``max_priority`` whose logical topic
    matches the subscription regex ``pattern`` (whole name): a pattern subscription would
    never read them. Levels missing are no error: a pattern may match topics created later."""
    compiled = re.compile(pattern)
    unread = []
    for name in names:
        try:
            logical, level = split_priority_topic(name)
        except ConfigError:
            continue
        if level >= max_priority and compiled.fullmatch(logical):
            unread.append(name)
    if unread:
        raise ConfigError(
            f"{', '.join(sorted(unread))} {'matches' if len(unread) == 1 else 'match'} pattern "
            f"{pattern!r} but {setting}={max_priority} reads only levels 0..{max_priority - 1}, "
            f"so its records would never be read; give a {setting} above every level the "
            f"pattern's topics have."
        )


def check_subscription(
    topics: Iterable[str], pattern: str | None, names: Iterable[str], max_priority: int,
    wait_for_topics: bool = False, setting: str = "max_priority",
) -> list[str]:
    """Check a subscription to logical ``topics`` (or a regex ``pattern``) with
    ``max_priority`` levels against the Kafka topic ``names`` the broker lists.

    A level topic at or above ``max_priority`` always raises ConfigError (see
    :func:`check_levels`). Missing level topics raise MissingTopicsError, unless
    ``wait_for_topics``: then the messages are returned, for the caller to warn with.
    """
    names = set(names)
    if pattern is not None:
        pattern_levels(pattern, names, max_priority, setting)
        return []
    waiting = []
    for topic in topics:
        try:
            check_levels(topic, names, max_priority, setting)
        except MissingTopicsError as exc:
            if not wait_for_topics:
                raise
            waiting.append(str(exc))
    return waiting
