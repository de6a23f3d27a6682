"""PriorityConsumer: aiokafka's AIOKafkaConsumer, with priority levels and capacity burst.

A logical topic ``orders`` with ``max_priority=3`` is the Kafka topics ``orders-0`` ..
``orders-2`` (2 the highest). One ``AIOKafkaConsumer`` per level reads that level's topics in
group ``<group_id>-<level>``. ``getmany()`` serves *rounds* of ``max_poll_records`` as the
confluent front-end does (:class:`~priority_kafka.burst.Round`: each level's reserved share,
then the bursting level's burst, highest level first), so a call asking for fewer records
(``getone()``, ``async for``) takes the next records of the current round and the levels keep
their shares however the caller batches.

Nothing is taken from a level's consumer before this call returns it: each level is asked, with
``getmany(timeout_ms=0, max_records=n)``, for exactly what the round serves it (aiokafka serves
that from its own prefetch). aiokafka moves a partition's position only over records it hands
out, so ``commit()`` without offsets, the auto-commit and the commit before a rebalance never
pass a record not returned.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from inspect import signature
from typing import TYPE_CHECKING, Any

import attrs
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import ConsumerStoppedError

from priority_kafka._checks import check_int, shown
from priority_kafka._levels import LevelRouter, PriorityFront, capacity_burst, figures_of, publish
from priority_kafka._properties import signature_kinds, typed_settings
from priority_kafka.aio._read_only import read_only
from priority_kafka.aio._records import LevelBuffer, aio_offsets, aio_partitions, grouped
from priority_kafka.burst import CapacityBurst, Round
from priority_kafka.config import PRIORITY_KINDS, connection_configs, split_configs
from priority_kafka.errors import ConfigError, IllegalStateError
from priority_kafka.naming import (
    check_subscription,
    level_pattern,
    priority_topic,
    split_priority_topic,
)

if TYPE_CHECKING:
    from priority_kafka._levels import LevelFigures

__all__ = ["PriorityConsumer"]

_log = logging.getLogger(__name__)

#: aiokafka's own max_partition_fetch_bytes (1 MiB).
_PARTITION_FETCH_BYTES: int = signature(AIOKafkaConsumer).parameters[
    "max_partition_fetch_bytes"
].default

#: How each setting given as text converts: ours, and AIOKafkaConsumer's by its defaults.
SETTING_KINDS = {**signature_kinds(AIOKafkaConsumer), **PRIORITY_KINDS}

# How long getone() waits in one getmany() before asking again (it waits as long as it takes).
_GETONE_WAIT_MS = 1000


def _level_partition_bytes(levels: int, fetch_max_bytes: int) -> int:
    """A level's ``max_partition_fetch_bytes`` unless given: aiokafka's default once per level,
    within the level's ``fetch_max_bytes``.

    One consumer of every level's partitions fetches up to that much of each in one request; a
    level's consumer fetches only its own, so at aiokafka's 1 MiB three levels sent three times
    the requests for the same records, and each level's prefetch ran out three times as often,
    ending rounds short (docs/asyncio.md). ``fetch_max_bytes`` still bounds each response."""
    return min(_PARTITION_FETCH_BYTES * levels, fetch_max_bytes)


class PriorityConsumer(PriorityFront):
    """Consume priority topics with ``aiokafka.AIOKafkaConsumer``'s API.

    ``PriorityConsumer("orders", bootstrap_servers=..., group_id="billing", max_priority=3)``
    takes every ``AIOKafkaConsumer`` argument (by its name or Java-style dotted name) plus
    ``max_priority`` (required), ``max_poll_records`` (most records per round and per
    ``getmany()``, default 500), ``max_poll_history_window_size`` (6),
    ``min_poll_window_maxout_threshold`` (4), ``max_poll_records_distributor`` and
    ``wait_for_topics``. ``group_id``, ``client_id`` and ``group_instance_id`` get a
    ``-<level>`` suffix per level. As ``AIOKafkaConsumer``, it is built inside a running loop.

    Guarantees: ``getmany()`` returns at most ``max_records`` (and ``max_poll_records``)
    records, highest level first, each partition's in offset order; each level gets its reserved
    share of every round and the bursting level borrows only what the others left unused
    (:mod:`priority_kafka.burst`). ``start()`` (for topics given here) and the first
    ``getmany()``/``getone()`` after ``subscribe()`` check the levels against the broker's
    topics (one metadata request, which creates no topic): a level topic at or above
    ``max_priority`` raises ConfigError naming it, a missing one MissingTopicsError naming it
    and how to create it (unless ``wait_for_topics``: then a warning).

    Deviations from ``AIOKafkaConsumer``: ``subscription()`` returns logical topic names;
    partition-level calls take priority-topic partitions (``TopicPartition("orders-2", 0)``)
    and go to the level that owns them; the rebalance listener is called per level, with that
    level's partitions.
    """

    def __init__(self, *topics: str, **configs: Any) -> None:
        # A string value (a .properties file, a command line) becomes its setting's type.
        configs = typed_settings(configs, SETTING_KINDS, (ConfigError, "AIOKafkaConsumer"))
        self._config, settings = split_configs(configs)
        self._router = LevelRouter(self._config.max_priority)
        self._burst = capacity_burst(self._config)
        self._reserved = self._burst.reserved
        self._connection = connection_configs(settings)
        # fetch_buffer_bytes, split over the levels, is each level's fetch size unless given.
        settings.setdefault(
            "fetch_max_bytes", self._config.fetch_buffer_bytes // len(self._reserved)
        )
        settings.setdefault("max_partition_fetch_bytes", _level_partition_bytes(
            len(self._reserved), settings["fetch_max_bytes"]
        ))
        # Each level's consumer, highest first: position i of the round is level levels[i].
        self._consumers = [
            AIOKafkaConsumer(**self._router.level_config(settings, level, "kafka-python"))
            for level in self._reserved
        ]
        for consumer in self._consumers:  # it only reads: it creates no topic
            read_only(consumer._client)
        self._by_level = dict(zip(self._reserved, self._consumers, strict=True))
        # Records the round serves, fetched for the take under way (see _prefill).
        self._buffers = [LevelBuffer() for _ in self._consumers]
        # Per round position, the pieces the take under way handed out (LevelBuffer.take):
        # read in position order, they are the call's records highest level first.
        self._pieces: list[list[tuple[TopicPartition, list[Any]]]] = [
            [] for _ in self._consumers
        ]
        self._returned = dict.fromkeys(self._reserved, 0)
        self._round: Round[Any] = Round(
            self._burst, self._config.max_poll_records, self._ask, ended=self._round_ended
        )
        self._published = publish(self._burst, {}, {}, {}, {}, {})
        # The level of each topic asked about (level_of parses the name).
        self._topic_levels: dict[str, int] = {}
        # A subscription not yet checked against the broker's topics: (topics, pattern).
        self._unchecked: tuple[tuple[str, ...], str | None] | None = None
        self._started = False
        self._closed = False
        if topics:
            self.subscribe(list(topics))

    # -- what PriorityConsumer adds ---------------------------------------------------------

    @property
    def burst(self) -> CapacityBurst:
        """The history windows and burst counts (read them; the consumer updates them)."""
        return self._burst

    @property
    def connection_configs(self) -> dict[str, Any]:
        """The settings given that say how to reach and authenticate to the cluster (a copy):
        what another client of it needs, such as the executor's dead-letter producer."""
        return dict(self._connection)

    @property
    def level_consumers(self) -> Mapping[int, AIOKafkaConsumer]:
        """Each level's ``AIOKafkaConsumer``, highest level first (read-only use)."""
        return dict(self._by_level)

    def priority_of(self, topic: str) -> int:
        """The priority level of a priority topic (``"orders-2"`` -> 2)."""
        return self._level_of(topic)

    @property
    def level_figures(self) -> Mapping[int, LevelFigures]:
        """Each level's figures as of the last ended round, highest level first (an immutable
        snapshot; ``records_prefetched`` and ``stalled_rebalances`` are always 0 here)."""
        return figures_of(self._published)

    def metrics(self) -> dict[int, dict[str, Any]]:
        """:attr:`level_figures` as dicts, keyed by level."""
        figures = figures_of(self._published)
        return {level: attrs.asdict(figures[level]) for level in figures}

    def _round_ended(self, counts: dict[int, int]) -> None:
        returned = self._returned
        for level, count in counts.items():
            returned[level] += count
        paused = {level: len(c.paused()) for level, c in self._by_level.items()}
        self._published = publish(self._burst, self._round.quotas, dict(returned), {}, {}, paused)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every level's consumer (connect, join its group if subscribed) and check a
        subscription given to the constructor against the broker; on failure the levels
        started are stopped again."""
        self._check_open()
        try:
            for consumer in self._consumers:
                await consumer.start()
            self._started = True
            await self._check_levels()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop every level's consumer (each commits with ``enable_auto_commit`` and leaves its
        group); the first failure is raised after all were stopped. Twice does nothing."""
        if self._closed:
            return
        self._closed = True
        errors = []
        for consumer in self._consumers:
            try:
                await consumer.stop()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    async def __aenter__(self) -> PriorityConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._closed else f"levels={list(self._reserved)}"
        return f"PriorityConsumer({state}, max_priority={self.max_priority})"

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerStoppedError("PriorityConsumer is stopped")

    # -- subscription and assignment --------------------------------------------------------

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Subscribe every level to its priority topics of the logical ``topics`` (or of the
        logical topics whose whole name matches ``pattern``). ``listener`` (aiokafka's
        ``ConsumerRebalanceListener``) is called with one level's partitions as its group
        rebalances. The levels are checked against the broker by ``start()`` or the next
        ``getmany()``/``getone()``."""
        self._check_open()
        if isinstance(topics, str) or not all(isinstance(t, str) for t in topics):
            raise TypeError(f"'topics' must be a list of topic names (got {shown(topics)})")
        names = tuple(topics)
        if bool(names) == (pattern is not None):
            raise ValueError("subscribe() takes topics or a pattern, exactly one of them")
        if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
            raise TypeError(
                f"'listener' must be an aiokafka ConsumerRebalanceListener (got {shown(listener)})"
            )
        for level, consumer in self._by_level.items():
            if pattern is not None:
                consumer.subscribe(pattern=level_pattern(pattern, level), listener=listener)
            else:
                level_topics = [priority_topic(t, level) for t in names]
                consumer.subscribe(topics=level_topics, listener=listener)
        self._unchecked = (names, pattern)

    async def _check_levels(self) -> None:
        """Check the subscription not yet checked against the broker's topics."""
        if self._unchecked is None or not self._started:
            return
        names, pattern = self._unchecked
        topics = await self._consumers[0].topics()  # every topic's name; creates none
        self._unchecked = None
        for waiting in check_subscription(
            names, pattern, topics, self.max_priority, self._config.wait_for_topics
        ):
            _log.warning("%s; the levels read them once they exist", waiting)

    def unsubscribe(self) -> None:
        """Unsubscribe every level."""
        self._check_open()
        self._unchecked = None
        for consumer in self._consumers:
            consumer.unsubscribe()

    def subscription(self) -> set[str]:
        """The logical topics subscribed to (for a pattern: those it matched so far)."""
        found: set[str] = set()
        for consumer in self._consumers:
            for name in consumer.subscription():
                found.add(split_priority_topic(name)[0])
        return found

    def assign(self, partitions: Iterable[Any]) -> None:
        """Assign priority-topic partitions, each to its level; levels given none are assigned
        nothing."""
        self._check_open()
        groups = self._router.group(aio_partitions(partitions))
        for level, consumer in self._by_level.items():
            consumer.assign(groups.get(level, []))

    def assignment(self) -> set[TopicPartition]:
        """Every level's assigned partitions."""
        return {tp for consumer in self._consumers for tp in consumer.assignment()}

    # -- consuming --------------------------------------------------------------------------

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Any]]:
        """Up to ``max_records`` records (at most ``max_poll_records``), highest level first,
        waiting up to ``timeout_ms`` for one if none is at hand; of ``partitions`` only, if
        given."""
        self._check_open()
        if not self._started:
            raise IllegalStateError("PriorityConsumer.getmany() before start()")
        if max_records is None:
            budget = self._config.max_poll_records
        elif max_records.__class__ is int and 0 < max_records <= 1 << 31:
            budget = max_records  # the usual case, without check_int's call
        else:
            budget = check_int("max_records", max_records, minimum=1, maximum=1 << 31)
        if timeout_ms.__class__ not in (int, float) or not timeout_ms >= 0:
            raise ValueError(f"timeout_ms must be a number >= 0 (got {shown(timeout_ms)})")
        if self._unchecked is not None:
            await self._check_levels()
        asked = self._asked(partitions) if partitions else None
        for pieces in self._pieces:
            pieces.clear()
        records = await self._take(budget, asked)
        if not records and timeout_ms > 0:
            await self._wait(budget, asked, time.monotonic() + timeout_ms / 1000)
        return grouped(self._pieces)

    def _level_of(self, topic: str) -> int:
        level = self._topic_levels.get(topic)
        if level is None:
            level = self._topic_levels[topic] = self._router.level_of(topic)
        return level

    def _asked(self, partitions: Sequence[TopicPartition]) -> list[list[TopicPartition]] | None:
        """Per round position, the partitions asked for (None: all)."""
        if not partitions:
            return None
        groups = self._router.group(aio_partitions(partitions))
        return [groups.get(level, []) for level in self._reserved]

    async def _take(self, budget: int, asked: list[list[TopicPartition]] | None) -> list[Any]:
        await self._prefill(budget, asked)
        return self._round.take(budget)

    async def _prefill(self, budget: int, asked: list[list[TopicPartition]] | None) -> None:
        """Fetch from each level what the next ``Round.take(budget)`` will ask it for, in the
        order it asks: each level's remaining credit, highest first, stopping at a level that
        runs dry; then the bursting level's extra out of what is left. So ``take`` finds its
        records in :attr:`_buffers` and takes them all. A level whose buffer holds what it
        will be asked for is not asked (aiokafka's ``getmany`` is a coroutine call per level)."""
        served = self._round
        if budget > served.left:
            budget = served.left
        counts, quotas, reserved = served.counts, served.quotas, self._reserved
        buffers = self._buffers
        # The bursting level: its position, its extra, and what its credit took.
        bursting: tuple[int, int, int] | None = None
        for position, level in enumerate(served.levels):
            count = counts[level]
            room = quotas[level] - count
            credit = reserved[level] - count
            if credit < 0:
                credit = 0
            elif credit > room:
                credit = room
            want = credit if credit < budget else budget
            if want > 0:
                held = buffers[position].held
                got = want if held >= want else await self._fetch(position, want, asked)
                budget -= got
                if got < want:
                    continue
            if room > credit:
                bursting = (position, room - credit, want)
        if bursting is not None and budget > 0:
            position, extra, held = bursting
            await self._fetch(position, held + (extra if extra < budget else budget), asked)

    async def _fetch(
        self, position: int, want: int, asked: list[list[TopicPartition]] | None,
        timeout_ms: float = 0,
    ) -> int:
        """Top level ``position``'s buffer up to ``want`` records; how many it holds."""
        buffer = self._buffers[position]
        missing = want - buffer.held
        if missing > 0:
            partitions = () if asked is None else asked[position]
            if asked is None or partitions:
                buffer.fill(await self._consumers[position].getmany(
                    *partitions, timeout_ms=timeout_ms, max_records=missing
                ))
        return min(buffer.held, want)

    def _ask(self, position: int, want: int, taken: list[Any]) -> list[Any]:
        return self._buffers[position].take(want, self._pieces[position])

    async def _wait(
        self, budget: int, asked: list[list[TopicPartition]] | None, deadline: float
    ) -> list[Any]:
        """Wait on every level with room in the round at once (records of any of them wake it:
        waiting on the highest alone, and asking the others now and then, let a lower level's
        records wait out the highest's wait), until records come or ``deadline``."""
        while (left := deadline - time.monotonic()) > 0:
            positions = self._round.with_room()
            if asked is not None:
                positions = [position for position in positions if asked[position]]
            if not positions:  # none of the partitions asked for is in the round
                await asyncio.sleep(left)
                return []
            if len(positions) == 1:
                await self._fetch(positions[0], 1, asked, timeout_ms=left * 1000)
            else:
                await self._first_of(positions, asked, left * 1000)
            # Served by the round's next take: the level's credit is counted there.
            records = await self._take(budget, asked)
            if records:
                return records
        return []

    async def _first_of(
        self, positions: list[int], asked: list[list[TopicPartition]] | None, timeout_ms: float
    ) -> None:
        """Wait on the levels at ``positions`` together until one has a record (in its buffer)
        or ``timeout_ms`` passed; the others' waits are cancelled (a cancelled ``getmany`` has
        taken nothing: aiokafka takes records only as it returns). A level's error is raised."""
        waits = [
            asyncio.ensure_future(self._fetch(position, 1, asked, timeout_ms))
            for position in positions
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
            outcomes = await asyncio.gather(*waits, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(
                outcome, asyncio.CancelledError
            ):
                raise outcome

    async def getone(self, *partitions: TopicPartition) -> Any:
        """The next record, highest level first, waiting for one as long as it takes."""
        while True:
            batch = await self.getmany(*partitions, timeout_ms=_GETONE_WAIT_MS, max_records=1)
            for records in batch.values():
                return records[0]

    def __aiter__(self) -> PriorityConsumer:
        self._check_open()
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None

    # -- offsets and positions --------------------------------------------------------------

    async def commit(self, offsets: Mapping[Any, Any] | None = None) -> None:
        """Commit the given offsets (an offset, ``(offset, metadata)`` or ``OffsetAndMetadata``
        per priority-topic partition), each level its own; without offsets, every level's
        position, which is past the records returned and no further."""
        self._check_open()
        if offsets is None:
            for consumer in self._consumers:
                if consumer.assignment():
                    await consumer.commit()
            return
        converted = aio_offsets(offsets)
        for level, group in self._router.group(converted).items():
            await self._by_level[level].commit({tp: converted[tp] for tp in group})

    async def committed(self, partition: TopicPartition) -> int | None:
        """The level's last committed offset of ``partition`` (None: none)."""
        return await self._level_consumer(partition).committed(partition)

    async def position(self, partition: TopicPartition) -> int:
        """The offset of the next record ``getmany()`` returns of ``partition``."""
        return await self._level_consumer(partition).position(partition)

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's last known high watermark."""
        return self._level_consumer(partition).highwater(partition)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on at the next ``getmany()``."""
        self._level_consumer(partition).seek(partition, offset)
        self._buffers[self._position(partition)].drop()

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Read the partitions (all assigned: none given) from their start."""
        await self._per_level("seek_to_beginning", partitions)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Read the partitions (all assigned: none given) from their end."""
        await self._per_level("seek_to_end", partitions)

    async def seek_to_committed(self, *partitions: TopicPartition) -> None:
        """Read the partitions (all assigned: none given) from their committed offsets."""
        await self._per_level("seek_to_committed", partitions)

    async def _per_level(self, name: str, partitions: Sequence[TopicPartition]) -> None:
        groups = self._router.group(aio_partitions(partitions)) if partitions else None
        for level, consumer in self._by_level.items():
            if groups is None:
                await getattr(consumer, name)()
            elif level in groups:
                await getattr(consumer, name)(*groups[level])

    def pause(self, *partitions: TopicPartition) -> None:
        """Return no records of these partitions until ``resume``."""
        for level, group in self._router.group(aio_partitions(partitions)).items():
            self._by_level[level].pause(*group)

    def resume(self, *partitions: TopicPartition) -> None:
        """Return records of paused partitions again."""
        for level, group in self._router.group(aio_partitions(partitions)).items():
            self._by_level[level].resume(*group)

    def paused(self) -> set[TopicPartition]:
        """The partitions paused, every level's."""
        return {tp for consumer in self._consumers for tp in consumer.paused()}

    async def topics(self) -> set[str]:
        """Every Kafka topic name of the cluster (a metadata request that creates none)."""
        return set(await self._consumers[0].topics())

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partition ids of a priority topic (``"orders-2"``), as known from metadata."""
        return self._by_level[self._router.level_of(topic)].partitions_for_topic(topic)

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[Any, int]:
        """The first offset of each partition."""
        return await self._offsets("beginning_offsets", partitions)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[Any, int]:
        """The offset after the last record of each partition."""
        return await self._offsets("end_offsets", partitions)

    async def _offsets(self, name: str, partitions: Iterable[TopicPartition]) -> dict[Any, int]:
        found: dict[Any, int] = {}
        for level, group in self._router.group(aio_partitions(partitions)).items():
            found.update(await getattr(self._by_level[level], name)(group))
        return found

    def _level_consumer(self, partition: Any) -> AIOKafkaConsumer:
        return self._by_level[self._router.level_of(partition.topic)]

    def _position(self, partition: Any) -> int:
        return list(self._reserved).index(self._router.level_of(partition.topic))

