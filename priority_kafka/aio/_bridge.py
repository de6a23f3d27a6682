"""The bridge between the synchronous callers of the package and aiokafka's event loop.

aiokafka's clients live on one event loop and are not thread-safe. The synchronous parts of
the package (``ShardedExecutor.run()`` on its polling thread, the contract suite, the CLI) drive
them by submitting coroutines to that loop and waiting for the answer
(``asyncio.run_coroutine_threadsafe``): :func:`call` for a coroutine, :func:`on_loop` for one of
aiokafka's plain methods, run on the loop's thread too. A client built for a synchronous caller
gets a loop of its own, a :class:`LoopThread`, closed with the client. Calling through the
bridge from the loop's own thread would wait on itself for ever: it raises instead, saying to
``await executor.run_async()``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from priority_kafka.errors import IllegalStateError

__all__ = ["BridgedProducer", "LoopThread", "Sent", "call", "forget_loop", "on_loop", "owned_loop",
           "submit"]

T = TypeVar("T")


class LoopThread:
    """An event loop running on a daemon thread of its own, until :meth:`close`."""

    def __init__(self, name: str = "priority-kafka-aio") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def build(self, factory: Callable[[], T]) -> T:
        """``factory()`` called on the loop's thread, inside the running loop (aiokafka's
        constructors ask for the running loop)."""
        async def built() -> T:
            return factory()

        return call(self.loop, built())

    def close(self) -> None:
        """Stop the loop and wait for its thread; what is still scheduled is cancelled."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self.loop.close()


#: The loops the family started for clients a synchronous caller asked for (not started yet
#: when built: the first use starts them), each closed with its client.
_OWNED: weakref.WeakKeyDictionary[Any, LoopThread] = weakref.WeakKeyDictionary()


def owned_loop(client: Any, thread: LoopThread | None = None) -> LoopThread | None:
    """Note that ``thread`` runs ``client`` for a synchronous caller; without ``thread``, the
    one noted (None: the client runs on its owner's loop, started by its owner)."""
    if thread is not None:
        _OWNED[client] = thread
    return _OWNED.get(client)


def forget_loop(client: Any) -> LoopThread | None:
    """The loop noted for ``client``, no longer noted."""
    return _OWNED.pop(client, None)


def _check_thread(loop: asyncio.AbstractEventLoop) -> None:
    if _running(loop):
        raise IllegalStateError(
            "a synchronous call (ShardedExecutor.run(), a blocking consumer call) was made on "
            "the thread of the event loop the aiokafka client runs on: it would wait on "
            "itself for ever; use `await executor.run_async()` (or `async with executor:`), or "
            "run it on another thread."
        )


def call(
    loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T],
    timeout: float | None = None,
) -> T:
    """Run ``coroutine`` on ``loop`` (running on another thread) and wait for its result, at
    most ``timeout`` seconds (then it is cancelled and TimeoutError raised)."""
    try:
        _check_thread(loop)
    except BaseException:
        coroutine.close()
        raise
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"no answer from the event loop within {timeout} s") from None


def submit(
    loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]
) -> concurrent.futures.Future[T]:
    """Start ``coroutine`` on ``loop`` without waiting: its answer's future."""
    return asyncio.run_coroutine_threadsafe(coroutine, loop)


def on_loop(loop: asyncio.AbstractEventLoop, method: Callable[..., T], *args: Any) -> T:
    """``method(*args)`` (a plain method of an aiokafka client) run on ``loop``'s thread: at
    once if this is that thread (a rebalance hook calling the client), else submitted."""
    if _running(loop):
        return method(*args)

    async def called() -> T:
        return method(*args)

    return call(loop, called())


def _running(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class Sent:
    """A send through the bridge: ``get(timeout)`` waits for the broker's answer (the shape of
    kafka-python's future, which the executor's dead letters wait on)."""

    __slots__ = ("_future",)

    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self._future = future

    def get(self, timeout: float | None = None) -> Any:
        return self._future.result(timeout)


class BridgedProducer:
    """An ``AIOKafkaProducer`` (or one given, on a loop running on another thread) driven
    synchronously: what the aiokafka family's ``producer()`` builds for a synchronous caller
    (dead letters, transactions, the contract suite), on a :class:`LoopThread` of its own
    (closed with it)."""

    def __init__(self, producer: Any, loop_thread: LoopThread | None = None) -> None:
        #: The aiokafka producer, started.
        self.producer = producer
        self.loop: asyncio.AbstractEventLoop = producer._loop
        self._loop_thread = loop_thread

    @classmethod
    def build(cls, settings: dict[str, Any]) -> BridgedProducer:
        """An ``AIOKafkaProducer(**settings)`` on a loop of its own, started (with a
        ``transactional_id``: its earlier holder fenced)."""
        from aiokafka import AIOKafkaProducer

        thread = LoopThread("priority-kafka-aio-producer")
        try:
            producer = thread.build(lambda: AIOKafkaProducer(**settings))
            call(thread.loop, producer.start())
        except BaseException:
            thread.close()
            raise
        return cls(producer, thread)

    def send(
        self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
        partition: int | None = None,
    ) -> Sent:
        """Send a record; the answer's ``get(timeout)`` waits for the broker."""
        return Sent(submit(self.loop, self.producer.send_and_wait(
            topic, value=value, key=key, headers=list(headers) if headers else None,
            partition=partition,
        )))

    def flush(self, timeout: float | None = None) -> None:
        call(self.loop, self.producer.flush(), timeout)

    def close(self) -> None:
        """Stop the producer (delivering what is queued) and its own loop."""
        try:
            if not self.loop.is_closed():
                call(self.loop, self.producer.stop())
        finally:
            if self._loop_thread is not None:
                self._loop_thread.close()

    def __repr__(self) -> str:
        return f"BridgedProducer({self.producer!r})"
