"""An executor run on a background thread, and waiting for what it does: for the benchmarks
and the tests alike."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from priority_kafka.executor import ShardedExecutor


class Running:
    """``executor.run()`` on a daemon thread; ``error`` holds what it raised. ``stop()`` stops
    the executor and joins the thread."""

    def __init__(self, executor: ShardedExecutor) -> None:
        self.executor = executor
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.executor.run()
        except BaseException as exc:
            self.error = exc

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
