"""close_within: every close runs at once, a blocked one is named and not waited for."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from priority_kafka.confluent import InvalidArgError, PriorityShareConsumer
from priority_kafka.confluent._closing import close_within


def test_a_blocked_close_is_named_and_left_while_the_others_finish(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    closed: list[str] = []

    def failing() -> None:
        raise RuntimeError("refused")

    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        errors = close_within([
            ("share group 'jobs-2'", lambda: release.wait(30)),
            ("share group 'jobs-1'", lambda: closed.append("jobs-1")),
            ("share group 'jobs-0'", failing),
        ], timeout=0.5)
    elapsed = time.monotonic() - started
    release.set()
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
