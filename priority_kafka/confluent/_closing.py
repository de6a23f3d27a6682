"""close_within: close librdkafka handles on helper threads, waiting a bounded time.

librdkafka 2.16's share consumer ``close()`` was seen to block for good (its
``rd_kafka_consumer_close0`` waiting on a reply that never came, the broker up, minutes past
``socket.timeout.ms``; once in this project's suite), and a thread blocked in C cannot be
interrupted from Python. Each close runs on its own daemon thread; what has not returned by the
deadline is named in a warning and left to finish, or to the end of the process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

__all__ = ["close_within"]

log = logging.getLogger(__name__)


def close_within(closes: Sequence[tuple[str, Callable[[], object]]], timeout: float
                 ) -> list[BaseException]:
    """Run every ``(name, close)`` at once on a daemon thread each and wait for them together
    for at most ``timeout`` seconds; return the errors they raised. A close still running at
    the deadline is logged as a warning naming it, and not waited for."""
    errors: list[BaseException] = []
    threads = []
    for name, close in closes:
        def run(close: Callable[[], object] = close) -> None:
            try:
                close()
            except BaseException as exc:  # handed to the caller
                errors.append(exc)

        thread = threading.Thread(target=run, name=f"close {name}", daemon=True)
        thread.start()
        threads.append((name, thread))
    deadline = time.monotonic() + timeout
    for name, thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            log.warning("%s did not close within %g s (librdkafka's close is blocked); "
                        "left to finish in the background", name, timeout)
    return errors
