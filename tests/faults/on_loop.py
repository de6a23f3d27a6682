"""The fault harness's executor for a family whose consumer lives on the caller's event loop
(``Family.caller_loop``, aiokafka): ``await executor.run_async()`` in an event loop of its own
thread, over a consumer built and started on that loop, as an asyncio application runs it.
Stopped as :class:`benchmarks._running.Running` is (``stop()``, ``error``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from priority_kafka.executor import ShardedExecutor

__all__ = ["OnLoop"]


class OnLoop:
    """``asyncio.run`` on a daemon thread: ``build()`` (called on the loop) gives the consumer,
    which is started there, and a ShardedExecutor over it with ``handler`` and ``options``
    runs with ``run_async()`` until :meth:`stop`; ``error`` holds what the run raised."""

    def __init__(self, build: Callable[[], Any], handler: Callable[[Any], Any],
                 **options: Any) -> None:
        self.error: BaseException | None = None
        self._build, self._handler, self._options = build, handler, options
        self._executor: ShardedExecutor | None = None
        self._ready = threading.Event()  # the executor exists (or building it failed)
        self.thread = threading.Thread(target=self._run, name="executor-on-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self.error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        consumer = self._build()
        await consumer.start()
        try:
            self._executor = ShardedExecutor(consumer, self._handler, **self._options)
        except BaseException:
            await consumer.stop()
            raise
        self._ready.set()
        await self._executor.run_async()  # closes the consumer

    def stop(self, timeout: float = 60) -> None:
        """Stop the executor (drained, committed, closed) and join the thread. ``stop()`` only
        sets a flag the poll loop reads, so it is called from here: a loop that never yields
        would not run a callback scheduled on it."""
        self._ready.wait(timeout)
        if self._executor is not None:
            self._executor.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "run_async() did not return"
