"""An executor run on a background thread, and waiting for a condition: what the tests and the
benchmarks share. No Kafka client is imported here, so a benchmark's contender process (which
imports its benchmark's module and this) loads only the client family it runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from priority_kafka.executor import ShardedExecutor

__all__ = ["Running", "wait_for"]


class Running:
    """``executor.run()`` on a daemon thread; ``error`` holds what it raised. ``stop()`` stops
    the executor and joins the thread; as a context manager, leaving the block stops it and
    raises what ``run()`` raised (unless the block is raising already)."""

    def __init__(self, executor: ShardedExecutor) -> None:
        self.executor = executor
        self.error: BaseException | None = None
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._run, name="running-executor", daemon=True)
        self.thread.start()

    def __enter__(self) -> Running:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        self.stop()
        if exc_type is None and self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            self.executor.run()
        except BaseException as exc:
            self.error = exc
        finally:
            self.ended.set()

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for ``event``, or less if the executor ended first: whether
        ``event`` is set. Raises what ``run()`` raised, at once, not after the timeout."""
        deadline = time.monotonic() + timeout_s
        while not event.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
            if self.ended.is_set() or time.monotonic() >= deadline:
                break
        if self.error is not None and not event.is_set():
            raise self.error
        return event.is_set()

    def stop(self, timeout: float = 60) -> None:
        self.executor.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "executor did not stop"


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` every 20 ms; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
