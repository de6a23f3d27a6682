"""The lifecycle both executors run: the states, ``run()`` with the stop signals, ``stop()``, the
drain and the release.

:class:`~priority_kafka.ShardedExecutor` and
:class:`~priority_kafka.confluent.ShareExecutor` each hold one :class:`Lifecycle` and hand it
what is their own: how a run starts, one round of its loop, what it does once drained (the final
commit, or the last acknowledgements) and how it closes its consumer. What every run owns
beyond that, the record handler (with its dead-letter producer) and the worker pool, is
released here. ``run_async()`` (``executor/_async.py``) awaits steps of its own and takes the
states, the stop request, ``stopping`` and the outcome from here.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Collection
from typing import Any, Protocol

from priority_kafka._structs import TopicPartition
from priority_kafka._workers._handling import Outcome, RecordHandler
from priority_kafka._workers._pool import Failure
from priority_kafka._workers._signals import run_signals
from priority_kafka.errors import ConfigError, HandlerError, IllegalStateError

__all__ = ["Lifecycle", "Pool", "State", "check_callables"]


class State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


def check_callables(handler: Any, on_failure: Any, failure_policy: str) -> None:
    """ConfigError unless ``handler`` is callable, and ``on_failure`` too under "callback"."""
    if not callable(handler):
        raise ConfigError(f"'handler' must be callable (got {handler!r}).")
    if failure_policy == "callback" and not callable(on_failure):
        raise ConfigError(
            f"'on_failure' must be callable when failure_policy is 'callback' "
            f"(got {on_failure!r})."
        )


class Pool(Protocol):
    """What a run needs of its pool: :class:`WorkerPool`, or the sharded executor's pool of
    an async handler's tasks."""

    @property
    def halted(self) -> bool: ...

    def discard(self, partitions: Collection[TopicPartition] | None = None) -> int: ...

    def wait_idle(self, partitions: Collection[TopicPartition] | None, budget_s: float
                  ) -> bool: ...

    def close(self) -> None: ...


class Lifecycle:
    """One executor's run, from NEW through RUNNING to CLOSED (once).

    ``stop_requested`` is set by :meth:`stop` (any thread, or a signal handler) and ends the
    loop; ``stopping`` is set once the loop begins to shut down (it cuts retry waits short and
    tells the rebalance hooks). ``log`` is the executor's logger; ``unfinished`` ends the
    warning of a drain that ran out of ``drain_timeout_ms`` (what becomes of the records still
    running); ``also`` names another way to run, for the error of a second run.
    """

    __slots__ = ("_also", "_drain_s", "_drain_timeout_ms", "_log", "_unfinished", "state",
                 "stop_requested", "stopping")

    def __init__(self, log: logging.Logger, drain_timeout_ms: int, unfinished: str,
                 also: str = "") -> None:
        self.state = State.NEW
        self.stop_requested = False
        self.stopping = threading.Event()
        self._log = log
        self._drain_timeout_ms = drain_timeout_ms
        self._drain_s = drain_timeout_ms / 1000
        self._unfinished = unfinished
        self._also = also

    def stop(self) -> None:
        """Ask the loop to stop; returns at once (safe from a signal handler)."""
        self.stop_requested = True

    def begin(self, *, take: bool = True) -> None:
        """IllegalStateError unless the executor never ran; ``take``: it runs now."""
        if self.state is not State.NEW:
            raise IllegalStateError(f"run() may be called once per executor{self._also} "
                                    f"(it is {self.state.value}).")
        if take:
            self.state = State.RUNNING

    def run(
        self, handle_signals: bool | None, pool: Pool, handler: RecordHandler, *,
        start: Callable[[], None], step: Callable[[], None], drained: Callable[[], None],
        close: Callable[[], None],
    ) -> None:
        """The blocking run: with the stop signals (see
        :func:`~priority_kafka._workers._signals.run_signals`), ``start()``, then ``step()``
        until :meth:`stop` or a record that is not done halts the pool, then :meth:`drain`
        and ``drained()``; whatever happened, :meth:`release`. The outcome is the caller's to
        raise (:meth:`raise_failure`)."""
        signals = run_signals(handle_signals, self.stop)
        self.begin()
        with signals:
            try:
                start()
                while not self.stop_requested and not pool.halted:
                    step()
                self.drain(pool)
                drained()
            finally:
                self.release(pool, handler, close)

    def drain(self, pool: Pool) -> None:
        """Drop the queued records and give the running ones ``drain_timeout_ms`` to finish
        (what they finish is marked by then); warn about those that did not."""
        self.stopping.set()
        pool.discard()
        if not pool.wait_idle(None, self._drain_s):
            self._log.warning("stop: handlers still running after drain_timeout_ms=%s; their "
                              "records %s", self._drain_timeout_ms, self._unfinished)

    def closing(self) -> None:
        """The run is over: CLOSED (and ``stopping``, should the loop have failed)."""
        self.stopping.set()
        self.state = State.CLOSED

    def release(self, pool: Pool, handler: RecordHandler, close: Callable[[], None]
                ) -> None:
        """:meth:`closing`, then ``close()`` (the executor's consumer and what it holds), the
        dead-letter producer, the handler and the pool."""
        self.closing()
        close()
        if handler.dead_letter_producer is not None:
            handler.dead_letter_producer.close()
        handler.close()
        pool.close()  # a handler stuck past the drain budget keeps its daemon

    def raise_failure(self, failure: Failure | None, failure_policy: str) -> None:
        """After the run: HandlerError (logged) for the record that failed under "stop" (or
        whose dead letter or callback failed), if any."""
        if failure is None or failure.result.outcome is not Outcome.FAILED:
            return
        result = failure.result
        assert result.error is not None
        self._log.error("stopped: record %s[%s]@%s failed: %r", failure.tp.topic,
                        failure.tp.partition, failure.record.offset, result.error)
        raise HandlerError(
            topic=failure.tp.topic, partition=failure.tp.partition,
            offset=failure.record.offset, attempts=result.attempts, policy=failure_policy,
            error=result.error,
        ) from result.error
