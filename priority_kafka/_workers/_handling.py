"""Running the handler on one record: retries, failure policies, dead letters, async handlers.

:class:`RecordHandler` is called on worker threads; it never touches the consumer. Its result,
an :class:`Outcome`, says whether the record is done (handled, dead-lettered, called back) or
not (failed, abandoned): a record that is not done is never committed past.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, NamedTuple

from priority_kafka._workers._loop_watch import LoopWatch
from priority_kafka._workers._loops import loop_thread
from priority_kafka._workers._outputs import Output
from priority_kafka.budgets import Throttled
from priority_kafka.config import ExecutorConfig
from priority_kafka.errors import DeserializationError

__all__ = [
    "DEAD_LETTER_HEADERS", "Outcome", "RecordHandler", "Result", "Undeserializable", "retry_delays",
]

log = logging.getLogger("priority_kafka.executor")

#: Headers added to a dead-lettered record (after the record's own headers), in this order.
DEAD_LETTER_HEADERS = (
    "dead_letter.error",
    "dead_letter.topic",
    "dead_letter.partition",
    "dead_letter.offset",
    "dead_letter.attempts",
)

#: How long a dead letter may take to be acknowledged before the record counts as failed.
_DEAD_LETTER_TIMEOUT_S = 30


class Outcome(enum.Enum):
    """What became of a record."""

    HANDLED = "handled"
    DEAD_LETTERED = "dead_lettered"
    CALLED_BACK = "called_back"
    # Retries were cut short by stop(): the record is not done and will be consumed again.
    ABANDONED = "abandoned"
    FAILED = "failed"

    @property
    def done(self) -> bool:
        """Whether the record may be committed past."""
        return self not in (Outcome.FAILED, Outcome.ABANDONED)


class Result(NamedTuple):
    """A record's outcome, the error behind it (if any) and the handler calls it took."""

    outcome: Outcome
    error: BaseException | None
    attempts: int


class Undeserializable:
    """A record the consumer could not deserialize: it goes to the failure policy as it came
    (raw key, value and headers), never to the handler, and without retries (a deserializer
    fails the same way every time)."""

    __slots__ = ("error",)

    def __init__(self, error: DeserializationError) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"Undeserializable({self.error})"

    @property
    def raw(self) -> Any:
        """The record as the client returned it (for ``on_failure``)."""
        return self.error.record if self.error.record is not None else self

    topic = property(lambda self: self.error.topic)
    partition = property(lambda self: self.error.partition)
    offset = property(lambda self: self.error.offset)
    key = property(lambda self: self.error.key)
    value = property(lambda self: self.error.value)
    headers = property(lambda self: self.error.headers)


def retry_delays(first_ms: int, max_ms: int) -> Iterator[float]:
    """Seconds to wait before each retry: ``first_ms``, doubling, capped at ``max_ms``."""
    delay = first_ms / 1000
    while True:
        yield delay
        delay = min(delay * 2, max_ms / 1000)


class RecordHandler:
    """Calls ``handler(record)`` with retries, then applies the failure policy.

    ``stopping`` cuts retry waits short (the record is then abandoned, not failed);
    ``count`` records a counter event (retries). An async handler's records are awaited
    through :meth:`call_on_loop` and :meth:`process_async` as tasks of an event loop (the
    executor's own under ``run()``, the caller's under ``run_async()``), or, with budgets under
    ``run()``, through :attr:`call` from worker threads on the private loop of :meth:`start`,
    at most ``async_concurrency`` at once. ``keep`` (exactly-once):
    called with each record and what its handler returned, once it returned (a dead letter is
    kept the same way, as an ``Output`` to the dead-letter topic, instead of being sent).
    """

    def __init__(
        self,
        handler: Callable[[Any], Any],
        config: ExecutorConfig,
        *,
        on_failure: Callable[[Any, BaseException, int], Any] | None,
        stopping: threading.Event,
        count: Callable[[str], None],
        keep: Callable[[Any, Any], None] | None = None,
        wrap: Callable[[Callable[[Any], Any]], Callable[[Any], Any]] | None = None,
    ) -> None:
        self._handler = handler
        self._keep = keep
        self._config = config
        self._on_failure = on_failure
        self._stopping = stopping
        self._count = count
        self.dead_letter_producer: Any = None
        self.is_async = inspect.iscoroutinefunction(handler)
        #: One attempt at a record: the handler itself, or for an async one, awaiting it on
        #: the event loop of :meth:`start` (budgets: the loop pool runs the others); raises
        #: what the handler raised.
        self.call: Callable[[Any], Any] = self._call_async_handler if self.is_async else handler
        if wrap is not None:  # budgets: each attempt takes its tokens (before keep sees it)
            self.call = wrap(self.call)
        if keep is not None:
            attempt = self.call

            def call_and_keep(record: Any) -> None:
                keep(record, attempt(record))

            self.call = call_and_keep
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop_thread: threading.Thread | None = None
        #: Names the first async handler step that blocked the loop (_loop_watch).
        self.loop_watch = LoopWatch()

    def process(
        self, record: Any, where: tuple[str, int, int], failed: Exception | None = None
    ) -> Result:
        """Handle ``record`` (of topic, partition, offset ``where``); never raises.

        ``failed``: the caller already made the first attempt with :attr:`call` and it raised
        this (workers call the handler directly and come here only on a failure, so a record
        that succeeds costs no more than the call)."""
        if isinstance(record, Undeserializable):
            return self._apply_policy(record, where, record.error, attempts=1)
        config = self._config
        delays = retry_delays(config.retry_backoff_ms, config.retry_backoff_max_ms)
        attempts = 0 if failed is None else 1
        error: Exception | None = failed
        while True:
            if error is None:
                attempts += 1
                try:
                    self.call(record)
                    return Result(Outcome.HANDLED, None, attempts)
                except Exception as exc:
                    error = exc
            delay = self._next_try(where, error, attempts, delays)
            if isinstance(delay, Result):
                return delay
            if delay is None:
                return self._apply_policy(record, where, error, attempts)
            if self._stopping.wait(delay):
                return Result(Outcome.ABANDONED, error, attempts)
            error = None

    async def process_async(
        self, record: Any, where: tuple[str, int, int], failed: Exception,
        stopping: asyncio.Event,
    ) -> Result:
        """:meth:`process` for an async handler on the running loop (``run_async()``), after
        its first attempt raised ``failed``: retries are awaited there (``stopping`` cuts their
        waits short); the failure policy (a dead letter waits for its acknowledgement, a
        callback may block) runs in a thread."""
        attempts, error = 1, failed
        delays = retry_delays(self._config.retry_backoff_ms, self._config.retry_backoff_max_ms)
        while not isinstance(record, Undeserializable):
            delay = self._next_try(where, error, attempts, delays)
            if isinstance(delay, Result):
                return delay
            if delay is None:
                break
            try:
                await asyncio.wait_for(stopping.wait(), delay)
                return Result(Outcome.ABANDONED, error, attempts)
            except TimeoutError:
                pass
            attempts += 1
            try:
                await self.call_on_loop(record)
                return Result(Outcome.HANDLED, None, attempts)
            except Exception as exc:
                error = exc
        return await asyncio.to_thread(self._apply_policy, record, where, error, attempts)

    def _next_try(
        self, where: tuple[str, int, int], error: Exception, attempts: int,
        delays: Iterator[float],
    ) -> float | Result | None:
        """After attempt ``attempts`` failed with ``error``: the wait before the next one, or
        None for the failure policy, or the Result (abandoned) when no attempt is left."""
        if attempts >= self._config.max_attempts:
            if isinstance(error, Throttled) and self._stopping.is_set():
                # Closed while waiting for a token: not a failure of the record.
                return Result(Outcome.ABANDONED, error, attempts)
            return None
        delay = next(delays)
        self._count("retries")
        log.info("retrying %s[%s]@%s in %.3fs after attempt %d: %r", *where, delay,
                 attempts, error)
        return delay

    def _apply_policy(
        self, record: Any, where: tuple[str, int, int], error: BaseException, attempts: int
    ) -> Result:
        policy = self._config.failure_policy
        try:
            if policy == "dead_letter":
                self._send_dead_letter(record, where, error, attempts)
                return Result(Outcome.DEAD_LETTERED, None, attempts)
            if policy == "callback":
                assert self._on_failure is not None
                raw = record.raw if isinstance(record, Undeserializable) else record
                self._on_failure(raw, error, attempts)
                return Result(Outcome.CALLED_BACK, None, attempts)
        except Exception as policy_error:  # the record is not done: stop rather than skip it
            policy_error.__cause__ = error
            return Result(Outcome.FAILED, policy_error, attempts)
        return Result(Outcome.FAILED, error, attempts)

    def _send_dead_letter(
        self, record: Any, where: tuple[str, int, int], error: BaseException, attempts: int
    ) -> None:
        values = (f"{type(error).__name__}: {error}", *where, attempts)
        headers = list(record.headers or ())
        headers += [
            (name, str(value).encode())
            for name, value in zip(DEAD_LETTER_HEADERS, values, strict=True)
        ]
        assert self._config.dead_letter_topic
        # The bytes as stored, when the consumer kept them (PriorityConsumer's deserializers).
        value = getattr(record, "raw_value", record.value)
        key = getattr(record, "raw_key", record.key)
        if self._keep is not None:  # exactly-once: in the transaction that commits the record
            self._keep(record, Output(self._config.dead_letter_topic, value, key, headers))
            return
        assert self.dead_letter_producer is not None
        future = self.dead_letter_producer.send(
            self._config.dead_letter_topic, value=value, key=key, headers=headers,
        )
        future.get(timeout=_DEAD_LETTER_TIMEOUT_S)

    def _call_async_handler(self, record: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(self._call_async(record), self._loop).result()

    # -- async handlers -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the event-loop thread of an async handler (nothing for a plain function)."""
        if not self.is_async:
            return
        limit = self._config.async_concurrency or self._config.shards

        def setup() -> None:
            self._semaphore = asyncio.Semaphore(limit)

        self._loop, self._loop_thread = loop_thread(setup)

    def close(self) -> None:
        """Stop the event loop (coroutines still running are abandoned with it)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._loop_thread is not None:
            self._loop_thread.join(timeout=0.5)

    async def _call_async(self, record: Any) -> Any:
        assert self._semaphore is not None
        async with self._semaphore:
            return await self._attempt_on_loop(record)

    def _attempt_on_loop(self, record: Any) -> Awaitable[Any]:
        result = self._handler(record)
        assert isinstance(result, Awaitable)
        return self.loop_watch.watched(result, record)

    def call_on_loop(self, record: Any) -> Awaitable[Any]:
        """One attempt of the async handler at ``record``, to await on the running loop (its
        steps watched for blocking the loop); with ``keep`` (exactly-once), what it returned
        is kept once it returned."""
        attempt = self._attempt_on_loop(record)
        return attempt if self._keep is None else self._kept(record, attempt)

    async def _kept(self, record: Any, attempt: Awaitable[Any]) -> None:
        assert self._keep is not None
        self._keep(record, await attempt)
