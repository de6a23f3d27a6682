"""LoopWatch: an async handler that blocks its event loop is named, not silently slowing the rest.

Each step of an ``async def`` handler (from one ``await`` that suspends to the next) runs on
the event loop's thread, and nothing else on that loop runs meanwhile: a handler that calls
``time.sleep`` or blocking I/O holds every other record's handler. The handler's coroutine is
driven through :class:`_Timed`, which times every step; the first step that held the loop for
``threshold_s`` or longer is logged as a warning, once per watch (one per executor), naming the
record (topic, partition, offset) and how long it held the loop. A step costs one generator
hop and two clock reads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Generator
from typing import Any

__all__ = ["BLOCKING_S", "LoopWatch"]

#: A step that holds the loop this long is named (ten times a slow network round trip).
BLOCKING_S = 0.1

log = logging.getLogger("priority_kafka.executor")


class LoopWatch:
    """Names the first handler step that held the event loop ``threshold_s`` or longer."""

    __slots__ = ("threshold_s", "warned")

    def __init__(self, threshold_s: float = BLOCKING_S) -> None:
        self.threshold_s = threshold_s
        #: The (topic, partition, offset, seconds) named, once one was.
        self.warned: tuple[str, int, int, float] | None = None

    def watched(self, awaitable: Awaitable[Any], record: Any) -> Awaitable[Any]:
        """``awaitable`` (the handler's coroutine for ``record``), its steps timed (once one
        warned, as it is)."""
        if self.warned is not None:
            return awaitable
        return _Timed(awaitable, record, self)

    def held(self, record: Any, seconds: float) -> None:
        if self.warned is None and seconds >= self.threshold_s:
            self.warned = (record.topic, record.partition, record.offset, seconds)
            log.warning(
                "the async handler held the event loop for %.3f s on record %s[%s]@%s without "
                "awaiting: every other handler on the loop waited meanwhile (blocking calls "
                "belong in a thread: asyncio.to_thread, or a plain def handler); named once",
                seconds, record.topic, record.partition, record.offset,
            )


class _Timed:
    """Awaits ``awaitable`` step by step, timing each step."""

    __slots__ = ("_awaitable", "_record", "_watch")

    def __init__(self, awaitable: Awaitable[Any], record: Any, watch: LoopWatch) -> None:
        self._awaitable = awaitable
        self._record = record
        self._watch = watch

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._awaitable.__await__()
        clock = time.perf_counter
        # Only a step at or over the threshold calls held(): a call per step cost more than
        # the step's two clock reads.
        threshold = self._watch.threshold_s
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = clock()
            try:
                yielded = steps.send(sent) if thrown is None else steps.throw(thrown)
            except StopIteration as done:
                if (held := clock() - started) >= threshold:
                    self._watch.held(self._record, held)
                return done.value
            except BaseException:
                if (held := clock() - started) >= threshold:
                    self._watch.held(self._record, held)
                raise
            if (held := clock() - started) >= threshold:
                self._watch.held(self._record, held)
            try:
                sent, thrown = (yield yielded), None
            except BaseException as exc:  # a cancellation goes into the handler
                sent, thrown = None, exc
