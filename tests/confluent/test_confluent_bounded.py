"""close_within: every close runs at once, a blocked one is named, not waited for, and says
when it ends;
BlockingCall: a call past its deadline is named and left, and none piles up behind it."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from priority_kafka.confluent import InvalidArgError, PriorityShareConsumer
from priority_kafka.confluent._bounded import BlockingCall, close_within


def test_a_blocked_close_is_named_and_left_while_the_others_finish(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    closed: list[str] = []

    def failing() -> None:
        raise RuntimeError("refused")

    started = time.monotonic()
    with caplog.at_level(logging.INFO):
        errors = close_within([
            ("share group 'jobs-2'", lambda: release.wait(30)),
            ("share group 'jobs-1'", lambda: closed.append("jobs-1")),
            ("share group 'jobs-0'", failing),
        ], timeout=0.5)
        elapsed = time.monotonic() - started
        assert "share group 'jobs-2' closed in the background" not in caplog.text
        (left,) = [t for t in threading.enumerate() if t.name == "close share group 'jobs-2'"]
        release.set()
        left.join(10)
        assert "share group 'jobs-2' closed in the background" in caplog.text
    assert 0.5 <= elapsed < 5, elapsed
    assert closed == ["jobs-1"]
    assert [str(error) for error in errors] == ["refused"]
    assert "share group 'jobs-2' did not close within 0.5 s" in caplog.text
    assert "jobs-1" not in caplog.text


@pytest.mark.parametrize("timeout", [0, -1, True, "30", None])
def test_close_refuses_a_timeout_that_is_not_a_positive_number(timeout: object) -> None:
    consumer = PriorityShareConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                                      "max.priority": 2})
    with pytest.raises(InvalidArgError, match="'timeout' must be a positive number"):
        consumer.close(timeout)  # type: ignore[arg-type]
    consumer.close(1)


def test_a_blocking_call_past_its_deadline_is_named_and_later_calls_fail_at_once_until_it_returns(
) -> None:
    release = threading.Event()
    commit = BlockingCall("commit of level 2")
    assert commit(lambda: 7, timeout=5) == 7 and commit.blocked_s() is None
    with pytest.raises(ValueError, match="refused"):
        commit(lambda: (_ for _ in ()).throw(ValueError("refused")), timeout=5)
    started = time.monotonic()
    with pytest.raises(TimeoutError,
                       match=r"^commit of level 2 did not return within 0.3 s \(librdkafka"):
        commit(lambda: release.wait(30), timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 5
    called: list[int] = []
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"^commit of level 2: the previous call, started "
                                           r"\d+ s ago, has not returned"):
        commit(lambda: called.append(1), timeout=5)
    assert called == [] and time.monotonic() - started < 0.2
    assert commit.blocked_s() is not None
    release.set()
    assert commit._blocked is not None
    commit._blocked[0].join(5)  # the blocked call returns on its own thread
    assert commit.blocked_s() is None
    assert commit(lambda: 8, timeout=5) == 8
