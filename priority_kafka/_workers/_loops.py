"""The event loops the executors own (an ``async def`` handler's, under ``run()``).

asyncio's epoll selector waits in whole milliseconds, rounded up: with a timer due in 0.2 ms
the loop sleeps 1 ms, so a handler awaiting ``asyncio.sleep(0.001)`` slept 1-2 ms and 64 of
them reached 0.70 of their ideal rate on an otherwise empty loop (0.83 with waits to the
microsecond). The loops here wait on the epoll object through ``select()``, whose timeout is
a ``timeval`` (microseconds), then collect the events from epoll without waiting; I/O still
wakes the loop at once (the epoll object is readable as soon as one of its files is).
"""

from __future__ import annotations

import asyncio
import select
import selectors
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["loop_thread", "new_event_loop"]


class _MicrosecondEpoll(selectors.EpollSelector):
    """epoll, its waits timed by ``select()`` on the epoll object (microseconds)."""

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        if timeout is not None and timeout > 0:
            try:
                select.select([self._selector], [], [], timeout)  # type: ignore[attr-defined]
            except ValueError:  # the epoll object's number is past what select() takes
                return super().select(timeout)
            except InterruptedError:  # a signal: the loop runs its handlers and comes back
                pass
            timeout = 0
        return super().select(timeout)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop whose timers fire to the microsecond where epoll exists (Linux), the
    platform's default loop elsewhere."""
    if hasattr(selectors, "EpollSelector"):
        return asyncio.SelectorEventLoop(_MicrosecondEpoll())
    return asyncio.new_event_loop()


def loop_thread(
    setup: Callable[[], None],
) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """A :func:`new_event_loop` running on a daemon thread (``priority-kafka-event-loop``),
    returned once ``setup()`` ran on it (what must be made on the running loop); the loop
    closes when it is stopped."""
    loop = new_event_loop()
    ready = threading.Event()

    def set_up() -> None:
        try:
            setup()
        finally:  # a setup that failed must not leave the caller waiting
            ready.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(set_up)
        try:
            loop.run_forever()
        finally:
            loop.close()

    thread = threading.Thread(target=serve, name="priority-kafka-event-loop", daemon=True)
    thread.start()
    ready.wait()
    return loop, thread
