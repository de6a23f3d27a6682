"""AioClient: an aiokafka consumer as the synchronous executor's client, through the bridge.

:class:`~priority_kafka.ShardedExecutor`'s ``run()`` speaks
:class:`~priority_kafka._types.ClientConsumer` from its polling thread; an ``AIOKafkaConsumer``
or an aio :class:`~priority_kafka.aio.PriorityConsumer` lives on its event loop, on another
thread. Every call is submitted to that loop and waited for (:mod:`priority_kafka.aio._bridge`).

The contract says a rebalance listener runs inside ``poll()``: aiokafka runs it from its
coordinator task whenever the group moves, so the listener given here waits for the next
``poll()`` before it runs, and a ``poll()`` does not return while one runs (both on the
loop's thread: no lock). aiokafka's ``committed()`` drops a commit's metadata, which the
executor's offset map is stored in: ``fetch_committed`` asks the group coordinator for the
offsets with their metadata (``AIOKafkaConsumer._coordinator.fetch_committed_offsets``, the
call ``committed()`` itself makes).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import OffsetMetadataTooLargeError
from aiokafka.util import commit_structure_validate

from priority_kafka._rebalance import check_listener
from priority_kafka._structs import OffsetAndMetadata, TopicPartition
from priority_kafka._types import ONE_LEVEL, DeadLetterSender, Levels, MetadataTooLarge
from priority_kafka.aio._bridge import call, forget_loop, on_loop, owned_loop, submit
from priority_kafka.aio._dead_letters import aio_dead_letters
from priority_kafka.aio._records import aio_offsets, aio_partitions
from priority_kafka.aio._transactions import AioTransactions, bridged
from priority_kafka.aio.consumer import PriorityConsumer
from priority_kafka.config import DEFAULT_COMMIT_TIMEOUT_MS

__all__ = [
    "AioClient", "committed_with_metadata", "group_ids", "level_consumers", "revoke_commit",
]


def level_consumers(consumer: Any) -> dict[int, AIOKafkaConsumer]:
    """Each level's ``AIOKafkaConsumer`` (a plain one: level 0)."""
    if isinstance(consumer, PriorityConsumer):
        return dict(consumer.level_consumers)
    return {0: consumer}


def levels_of(consumer: Any) -> Levels:
    """The consumer's priority levels (a plain one: one level)."""
    return consumer.levels if isinstance(consumer, PriorityConsumer) else ONE_LEVEL


def group_ids(consumer: Any, offsets: Mapping[Any, Any]) -> list[tuple[str, dict[Any, Any]]]:
    """``offsets`` split by consumer group (a PriorityConsumer: one per level), each with its
    group id: what aiokafka's ``send_offsets_to_transaction`` takes."""
    levels = level_consumers(consumer)
    level_of = levels_of(consumer).level_of
    by_level: dict[int, dict[Any, Any]] = {}
    for tp, meta in offsets.items():
        by_level.setdefault(level_of(tp.topic), {})[tp] = meta
    return [(levels[level]._group_id, group) for level, group in by_level.items()]


async def committed_with_metadata(
    consumer: Any, partitions: Iterable[Any]
) -> dict[TopicPartition, OffsetAndMetadata]:
    """The committed offset and metadata of each of ``partitions`` that has one."""
    levels = level_consumers(consumer)
    level_of = levels_of(consumer).level_of
    by_level: dict[int, list[Any]] = {}
    for tp in aio_partitions(partitions):
        by_level.setdefault(level_of(tp.topic), []).append(tp)
    found = {}
    for level, group in by_level.items():
        answer = await levels[level]._coordinator.fetch_committed_offsets(group)
        for tp, meta in answer.items():
            if meta.offset >= 0:
                found[TopicPartition(tp.topic, tp.partition)] = OffsetAndMetadata(
                    meta.offset, meta.metadata or ""
                )
    return found


async def revoke_commit(consumer: Any, offsets: Mapping[Any, Any]) -> None:
    """Commit ``offsets`` in each level's current generation, assigned or not (see
    :meth:`AioClient.commit_async`)."""
    levels = level_consumers(consumer)
    level_of = levels_of(consumer).level_of
    by_level: dict[int, dict[Any, Any]] = {}
    for tp, meta in aio_offsets(offsets).items():
        by_level.setdefault(level_of(tp.topic), {})[tp] = meta
    for level, group in by_level.items():
        coordinator = levels[level]._coordinator
        await coordinator.commit_offsets(None, commit_structure_validate(group))


class _PendingCommit:
    """A commit submitted to the loop (the executor's :class:`PendingCommit`)."""

    __slots__ = ("_future",)

    def __init__(self, future: Any) -> None:
        self._future = future

    @property
    def is_done(self) -> bool:
        return bool(self._future.done())

    @property
    def exception(self) -> BaseException | None:
        exc: BaseException | None = self._future.exception()
        return _metadata_error(exc) if exc is not None else None


def _metadata_error(exc: BaseException) -> BaseException:
    if isinstance(exc, OffsetMetadataTooLargeError):
        too_large = MetadataTooLarge(str(exc))
        too_large.__cause__ = exc
        return too_large
    return exc


class _InsidePoll(ConsumerRebalanceListener):
    """The listener given to ``subscribe``, each event run only while a ``poll()`` runs."""

    def __init__(self, client: AioClient, listener: Any) -> None:
        self._client = client
        self._listener = listener

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._client._inside_poll(self._listener.on_partitions_revoked, revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._client._inside_poll(self._listener.on_partitions_assigned, assigned)


class AioClient:
    """An ``AIOKafkaConsumer`` or aio PriorityConsumer, started, whose loop runs on another
    thread, in the executor's client shape."""

    def __init__(self, consumer: Any, commit_timeout_ms: int = DEFAULT_COMMIT_TIMEOUT_MS) -> None:
        self._consumer = consumer
        self._loop: asyncio.AbstractEventLoop = next(iter(level_consumers(consumer).values()))._loop
        self._timeout_s = commit_timeout_ms / 1000
        # Loop-thread state: a poll() under way, the hooks running, and their wake-ups.
        self._polling = False
        self._hooks = 0
        self._poll_started = asyncio.Event()
        self._hooks_done = asyncio.Event()
        # Built by the family for a synchronous caller: started on first use.
        self._unstarted = owned_loop(consumer) is not None

    @property
    def consumer(self) -> Any:
        """The consumer this client drives."""
        return self._consumer

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> Mapping[TopicPartition, list[Any]]:
        """The consumer's ``getmany``, during which (and only then) rebalance hooks run."""
        return call(self._loop, self._poll(timeout_ms, max_records))

    async def _start(self) -> None:
        if self._unstarted:
            self._unstarted = False
            await self._consumer.start()

    async def _poll(self, timeout_ms: float, max_records: int | None) -> Any:
        await self._start()
        self._polling = True
        self._poll_started.set()
        try:
            batch = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
            while self._hooks:
                self._hooks_done.clear()
                await self._hooks_done.wait()
            return batch
        finally:
            self._polling = False
            self._poll_started.clear()

    async def _inside_poll(self, hook: Callable[[Any], Any], partitions: Any) -> None:
        while not self._polling:
            await self._poll_started.wait()
        self._hooks += 1
        try:
            result = hook(partitions)
            if inspect.isawaitable(result):
                await result
        finally:
            self._hooks -= 1
            if not self._hooks:
                self._hooks_done.set()

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        check_listener(listener)
        gated = _InsidePoll(self, listener) if listener is not None else None
        if self._unstarted:
            call(self._loop, self._subscribe(list(topics), pattern, gated))
        else:  # started by its owner: at once on its loop (the caller's, for run_async())
            on_loop(self._loop, self._subscribe_now, list(topics), pattern, gated)

    async def _subscribe(self, topics: list[str], pattern: str | None, listener: Any) -> None:
        await self._start()
        self._subscribe_now(topics, pattern, listener)

    def _subscribe_now(self, topics: list[str], pattern: str | None, listener: Any) -> None:
        if pattern is not None:
            self._consumer.subscribe(pattern=pattern, listener=listener)
        else:
            self._consumer.subscribe(topics=topics, listener=listener)

    def pause(self, *partitions: TopicPartition) -> None:
        on_loop(self._loop, self._consumer.pause, *aio_partitions(partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        on_loop(self._loop, self._consumer.resume, *aio_partitions(partitions))

    def paused(self) -> set[TopicPartition]:
        return set(on_loop(self._loop, self._consumer.paused))

    def assignment(self) -> set[TopicPartition]:
        return set(on_loop(self._loop, self._consumer.assignment))

    def subscription(self) -> set[str] | None:
        return set(on_loop(self._loop, self._consumer.subscription))

    def seek(self, partition: TopicPartition, offset: int) -> None:
        on_loop(self._loop, self._consumer.seek, *aio_partitions([partition]), offset)

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """A synchronous commit, at most ``commit_timeout_ms`` long (TimeoutError)."""
        try:
            call(self._loop, self._consumer.commit(aio_offsets(offsets)), self._timeout_s)
        except OffsetMetadataTooLargeError as exc:
            raise MetadataTooLarge(str(exc)) from exc

    def fetch_committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        return call(self._loop, committed_with_metadata(self._consumer, partitions),
                    self._timeout_s)

    # -- on the consumer's own loop (the executor's run_async()) ------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the consumer runs on."""
        return self._loop

    async def poll_async(self, timeout_ms: float) -> Mapping[TopicPartition, list[Any]]:
        """:meth:`poll` awaited on the consumer's loop."""
        batch: Mapping[TopicPartition, list[Any]] = await self._poll(timeout_ms, None)
        return batch

    async def commit_on_loop(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """:meth:`commit` awaited on the consumer's loop."""
        try:
            await asyncio.wait_for(self._consumer.commit(aio_offsets(offsets)), self._timeout_s)
        except OffsetMetadataTooLargeError as exc:
            raise MetadataTooLarge(str(exc)) from exc

    async def fetch_committed_on_loop(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """:meth:`fetch_committed` awaited on the consumer's loop."""
        return await asyncio.wait_for(
            committed_with_metadata(self._consumer, partitions), self._timeout_s
        )

    async def close_on_loop(self) -> None:
        """:meth:`close` awaited on the consumer's loop (which is the caller's: not closed)."""
        await asyncio.wait_for(self._stop(), self._timeout_s)

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Any:
        """The commit as a coroutine, for a revoke hook (on the loop) to await: through each
        level's group coordinator, as ``commit()`` does but without its check that the
        partitions are assigned. A subscription changed by ``subscribe()`` drops aiokafka's
        assignment at once, before the revoke hook runs, though the member owns the partitions
        (and its commits are accepted) until it rejoins."""
        return revoke_commit(self._consumer, offsets)

    def commit_in_background(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> _PendingCommit:
        """The commit submitted to the loop; the polling thread goes on meanwhile."""
        return _PendingCommit(submit(self._loop, self._consumer.commit(aio_offsets(offsets))))

    def close(self) -> None:
        """Stop the consumer within ``commit_timeout_ms`` (hooks waiting for a poll run now),
        and the loop the family started for it, if it did."""
        try:
            if not self._loop.is_closed():
                call(self._loop, self._stop(), self._timeout_s)
        finally:
            thread = forget_loop(self._consumer)
            if thread is not None:
                thread.close()

    async def _stop(self) -> None:
        self._polling = True  # a hook of the leave-group revoke runs at once
        self._poll_started.set()
        await self._consumer.stop()

    @property
    def levels(self) -> Levels:
        """The consumer's priority levels (one level for an ``AIOKafkaConsumer``)."""
        return levels_of(self._consumer)

    def transactions(self, producer: Any, owned: bool = False) -> AioTransactions:
        """See :meth:`ClientConsumer.transactions`: an ``AIOKafkaProducer`` (started, on a loop
        running on another thread) or the family's ``producer()``, with a
        ``transactional_id``."""
        return AioTransactions(bridged(producer), owned)

    def transaction_groups(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> list[tuple[Any, dict[TopicPartition, OffsetAndMetadata]]]:
        """Per consumer group, its id: aiokafka's ``send_offsets_to_transaction`` takes the
        group id, not a member's metadata (no KIP-447 fencing; docs/asyncio.md)."""
        return group_ids(self._consumer, offsets)

    def rejoin_refused(
        self, error: BaseException, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> bool:
        """See :meth:`ClientConsumer.rejoin_refused`: aiokafka sends no membership with a
        transaction's offsets (above), so none is refused."""
        return False

    def dead_letter_producer(self, given: Any) -> Callable[[], DeadLetterSender]:
        """See :meth:`ClientConsumer.dead_letter_producer`; None: a producer of our own that
        connects as the consumer does."""
        return aio_dead_letters(given, self._connection)

    def _connection(self) -> dict[str, Any]:
        configs = getattr(self._consumer, "connection_configs", None)  # a PriorityConsumer's
        if isinstance(configs, Mapping):
            return dict(configs)
        return {"bootstrap_servers": self._consumer._client._bootstrap_servers}

    def __repr__(self) -> str:
        return f"AioClient({self._consumer!r})"

