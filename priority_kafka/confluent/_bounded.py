"""Blocking librdkafka calls on helper threads, waited for a bounded time.

A thread blocked in C cannot be interrupted from Python, and librdkafka has calls that can
block for good: 2.16's share consumer ``close()`` (its ``rd_kafka_consumer_close0`` waiting on
a reply that never came, the broker up, minutes past ``socket.timeout.ms``; once in this
project's suite), and a synchronous ``commit()`` or ``close()`` of a consumer whose handle lost
every broker (librdkafka #5301: the OffsetCommit is retried for ever). ``close_within`` closes
several handles at once; :class:`BlockingCall` makes one call (a commit) at a time. What has
not returned by its deadline is named, and left to finish in the background, or with the
process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["BlockingCall", "close_within"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def close_within(closes: Sequence[tuple[str, Callable[[], object]]], timeout: float
                 ) -> list[BaseException]:
    """Run every ``(name, close)`` at once on a daemon thread each and wait for them together
    for at most ``timeout`` seconds; return the errors they raised. A close still running at
    the deadline is logged as a warning naming it, and not waited for."""
    errors: list[BaseException] = []
    threads = []
    # The closes left running, so each says when it ends (or the process ends first): the
    # soak counts librdkafka handles that never finish closing.
    left: set[str] = set()
    lock = threading.Lock()
    started = time.monotonic()
    for name, close in closes:
        def run(name: str = name, close: Callable[[], object] = close) -> None:
            try:
                close()
            except BaseException as exc:  # handed to the caller
                errors.append(exc)
            finally:
                with lock:
                    late = name in left
                if late:
                    log.info("%s closed in the background, %.1f s after its close began",
                             name, time.monotonic() - started)

        thread = threading.Thread(target=run, name=f"close {name}", daemon=True)
        thread.start()
        threads.append((name, thread))
    deadline = started + timeout
    for name, thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        with lock:
            if thread.is_alive():
                left.add(name)
        if name in left:
            log.warning("%s did not close within %g s (librdkafka's close is blocked); "
                        "left to finish in the background", name, timeout)
    return errors


class BlockingCall:
    """One blocking call at a time (``name``: what it is, for messages), each on a daemon
    thread and waited for at most a timeout.

    A call still running at its deadline raises TimeoutError and is left running; until it
    returns, every further call raises TimeoutError at once (calls never pile up behind a
    blocked handle).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        #: The call left running at its deadline, and when it started.
        self._blocked: tuple[threading.Thread, float] | None = None

    def blocked_s(self) -> float | None:
        """How long the call left running at its deadline has run; None once it returned (or
        if none was left)."""
        if self._blocked is None:
            return None
        thread, started = self._blocked
        if not thread.is_alive():
            self._blocked = None
            return None
        return time.monotonic() - started

    def __call__(self, call: Callable[[], T], timeout: float) -> T:
        """``call()``'s result or error, if it returns within ``timeout`` seconds."""
        blocked = self.blocked_s()
        if blocked is not None:
            raise TimeoutError(
                f"{self._name}: the previous call, started {blocked:.0f} s ago, has not "
                f"returned (librdkafka is blocked); not called again"
            )
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append((True, call()))
            except BaseException as exc:  # handed to the caller
                outcome.append((False, exc))

        started = time.monotonic()
        thread = threading.Thread(target=run, name=self._name, daemon=True)
        thread.start()
        thread.join(timeout)
        if not outcome:
            self._blocked = (thread, started)
            raise TimeoutError(
                f"{self._name} did not return within {timeout:g} s (librdkafka is blocked); "
                f"left running"
            )
        ok, value = outcome[0]
        if not ok:
            raise value
        return value
