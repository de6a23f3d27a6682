"""TopicLevels, the producers' cached topic list (pure logic: the fetch and clock are faked)."""

from __future__ import annotations

import pytest

from priority_kafka import MissingTopicsError, _topic_levels
from priority_kafka._topic_levels import MAX_AGE_S, MIN_REFRESH_S, RETRY_S, TopicLevels


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(_topic_levels.time, "monotonic", lambda: now[0])
    return now


def test_asks_once_then_on_a_miss_at_most_once_a_second_and_when_stale(clock):
    listed = [{"t-0", "t-1"}]
    calls = []

    def fetch():
        calls.append(clock[0])
        return listed[0]

    levels = TopicLevels(fetch)
    assert levels.check("t", 1) == [0, 1]
    assert levels.check("t", 0) == [0, 1] and len(calls) == 1  # known: no request
    with pytest.raises(MissingTopicsError, match=r"t-2 does not exist \('t' has levels "
                       r"t-0\.\.t-1 on the broker\)"):
        levels.check("t", 2)
    assert len(calls) == 1  # the miss within MIN_REFRESH_S of the last answer asks not again
    clock[0] += MIN_REFRESH_S
    listed[0] = {"t-0", "t-1", "t-2"}
    assert levels.check("t", 2) == [0, 1, 2] and len(calls) == 2  # a miss asks again
    clock[0] += MAX_AGE_S + 1
    levels.check("t", 0)
    assert len(calls) == 3  # stale: asked again though known


def test_a_failed_refresh_keeps_a_known_level_and_fails_an_unknown_one(clock):
    answers = [{"t-0"}]

    def fetch():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    levels = TopicLevels(fetch)
    levels.check("t", 0)
    clock[0] += MAX_AGE_S + 1
    answers.append(OSError("down"))
    assert levels.check("t", 0) == [0]  # kept, for RETRY_S
    clock[0] += RETRY_S - 1
    assert levels.check("t", 0) == [0]  # not asked again meanwhile (answers is empty)
    clock[0] += MIN_REFRESH_S + 1
    answers.append(OSError("still down"))
    with pytest.raises(OSError, match="still down"):
        levels.check("t", 5)
