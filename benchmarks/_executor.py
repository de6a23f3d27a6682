"""What the executor benchmarks share: the consumer per client, a handler meter, running an
executor to a count, and the confluent / kafka-python comparison.

``--client kafka-python|confluent|both`` (:mod:`benchmarks._clients`) chooses the client family
the executor runs on: :func:`executor_consumer` builds the same consumer on either (a fresh
group, read from the earliest offset, no auto-commit, the same ``max_poll_records``); with
``both`` the two are contenders in the same interleaved run.

``--guarantees at-least-once exactly-once`` (:func:`add_guarantee_argument`) adds, next to each
executor contender (which runs with the executor's defaults: at-least-once with the offset map),
the same run under another delivery guarantee, named ``<contender>/<guarantee>``
(:func:`guaranteed`): ``at-least-once`` is the watermark alone (``offset_map=False``),
``exactly-once`` a transactional producer of the client's family, the handler returning each
record as an ``Output`` to a topic, the consumer reading ``read_committed``. With
``exactly-once`` among them, every executor contender writes each record to that topic (the
others through a plain producer, from the handler), so all run the same pipeline.
:func:`guarantee_ratios` compares each with ``at-least-once`` round by round.

Times are measured inside the handlers: ``processing_s`` runs from the first handler start to
the last handler end (the executor's steady work), ``wall_s`` from ``run()`` to the last
handler end (adds the consumer group join and the first fetch).
"""

from __future__ import annotations

import argparse
import itertools
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from benchmarks._clients import check_client
from benchmarks._code import family, registry
from benchmarks._common import Interleaved, ratio_summary, unique
from benchmarks._consumers import MAX_POLL_RECORDS, MAX_PRIORITY, priority_consumer, raw_consumer
from benchmarks._running import Running
from priority_kafka.executor import ShardedExecutor


def executor_consumer(
    client: str,
    bootstrap_servers: str,
    topics: Sequence[str],
    levels: bool = False,
    max_poll_records: int = MAX_POLL_RECORDS,
    read_committed: bool = False,
    overrides: Mapping[str, Any] | None = None,
) -> Any:
    """The executor's consumer on ``client``, subscribed: a fresh group, earliest offsets, no
    auto-commit, at most ``max_poll_records`` a poll, plus the client's own settings
    ``overrides`` (kafka-python or librdkafka names). With ``levels``, a PriorityConsumer over
    the ``MAX_PRIORITY`` levels of the logical topic ``topics[0]``; else a plain consumer of
    ``topics``. confluent's come as the executor's client (``as_client``), subscribed through
    it: a confluent consumer cannot tell the executor what it subscribed to.
    """
    overrides = dict(overrides or {})
    if read_committed:  # librdkafka's default already; kafka-python's is read_uncommitted
        overrides[registry().family(client).key("isolation.level")] = "read_committed"
    if not family(client).librdkafka:
        if levels:
            return priority_consumer(
                bootstrap_servers, topics[0], max_poll_records=max_poll_records, **overrides
            )
        return raw_consumer(
            bootstrap_servers, topics, max_poll_records=max_poll_records, **overrides
        )
    check_client(client)
    from confluent_kafka import Consumer

    from priority_kafka.confluent import PriorityConsumer

    try:
        from priority_kafka.confluent.executor import ConfluentClient
        from priority_kafka.executor._clients import as_client
    except ImportError:  # the adapters' names before issue 21, for --code comparisons
        from priority_kafka.confluent.executor import (  # type: ignore[attr-defined,no-redef]
            ClientConsumer as ConfluentClient,
        )
        from priority_kafka.confluent.executor import (  # type: ignore[attr-defined,no-redef]
            PriorityClientConsumer as as_client,
        )

    settings = {
        "bootstrap.servers": bootstrap_servers, "group.id": unique("bench"),
        "auto.offset.reset": "earliest", "enable.auto.commit": False, **overrides,
    }
    if levels:
        client = as_client(PriorityConsumer({
            **settings, "max.priority": MAX_PRIORITY, "max.poll.records": max_poll_records,
        }))
    else:
        # A plain Consumer has no max.poll.records: the adapter takes it.
        client = ConfluentClient(Consumer(settings), max_poll_records)
    client.subscribe(list(topics))
    return client


#: Delivery guarantees a benchmark may run beside the executor's default (the offset map).
GUARANTEES = ("at-least-once", "exactly-once")


def add_guarantee_argument(parser: argparse.ArgumentParser) -> None:
    """``--guarantees [at-least-once] [exactly-once]`` (default: none)."""
    parser.add_argument(
        "--guarantees", nargs="+", choices=GUARANTEES, default=[],
        help="also run every executor contender under these delivery guarantees "
             "(<contender>/<guarantee>); the ratios to at-least-once are reported",
    )


def guaranteed(
    guarantee: str | None, client: str, bootstrap_servers: str, out_topic: str | None,
    handler: Callable[[Any], Any],
) -> tuple[dict[str, Any], Callable[[Any], Any], Callable[[], None]]:
    """The executor options, the handler and a cleanup for ``guarantee`` (None: the
    defaults, with the offset map). With an ``out_topic`` every guarantee runs the same
    pipeline, each record written there after ``handler``: exactly-once returns it as an
    ``Output`` for the transaction, the others send it themselves with a plain producer (as
    an at-least-once consume-transform-produce handler does), so only the delivery differs."""
    if guarantee not in (None, *GUARANTEES):
        raise ValueError(f"unknown guarantee {guarantee!r}")
    options: dict[str, Any] = {"offset_map": False} if guarantee == "at-least-once" else {}
    if out_topic is None:
        return options, handler, lambda: None
    transactional = guarantee == "exactly-once"
    # Here, not at the top: contenders import this module on another commit's priority_kafka
    # (--code), which may predate Output.
    from priority_kafka.executor import Output

    transactional_id = unique("bench-tx") if transactional else None
    producer: Any
    librdkafka = family(client).librdkafka
    if not librdkafka:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=5,
                                 transactional_id=transactional_id)
        send = producer.send
    else:
        from confluent_kafka import Producer

        config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "linger.ms": 5}
        if transactional_id is not None:
            config["transactional.id"] = transactional_id
        producer = Producer(config)

        def send(topic: str, value: Any, key: Any) -> None:
            while True:
                try:
                    producer.produce(topic, value=value, key=key)
                    producer.poll(0)
                    return
                except BufferError:
                    producer.poll(0.1)

    def close() -> None:
        if not librdkafka:
            producer.close()
        else:
            producer.flush(30)

    def produce(record: Any) -> Any:
        handler(record)
        if transactional:
            return Output(out_topic, value=record.value, key=record.key)
        send(out_topic, value=record.value, key=record.key)
        return None

    if transactional:
        options["transactional_producer"] = producer
    return options, produce, close


def with_guarantee(name: str, guarantee: str | None) -> str:
    """A contender's name under ``guarantee`` (None: the default run's own name)."""
    return name if guarantee is None else f"{name}/{guarantee}"


def guarantee_ratios(
    runs: Interleaved, names: Iterable[str], guarantees: Sequence[str], key: str,
    lower_is_better: bool,
) -> dict[str, Any]:
    """Per contender ``name``: the offset map (the default run) and each other guarantee
    against at-least-once, per round (a throughput ratio; times inverted, so above 1 is
    faster and 0.95 means 5% slower). Empty without at-least-once."""
    if "at-least-once" not in guarantees:
        return {}
    compared: dict[str, Any] = {}
    for name in names:
        base = runs.values(with_guarantee(name, "at-least-once"), key)
        entry = {}
        for label, guarantee in [("offset-map", None)] + [
            (g, g) for g in guarantees if g != "at-least-once"
        ]:
            values = runs.values(with_guarantee(name, guarantee), key)
            entry[label] = (ratio_summary(base, values) if lower_is_better
                            else ratio_summary(values, base))
        compared[name] = entry
    return compared


class Meter:
    """Counts handled records and notes the first start, the end of the ``expected // 2``-th
    (at least the first: the start of the second half, the steady state) and of the
    ``expected``-th (the last end). Thread-safe without a lock (``next()`` of a counter is
    atomic): a lock every handler takes would make the handlers contend in the harness, which
    parallel-consumer's harness (an AtomicLong) does not."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.first_start: float | None = None
        self.half_end: float | None = None
        self.last_end = 0.0
        self.done = threading.Event()
        self._counter = itertools.count(1)
        self._half = max(1, expected // 2)

    def _started(self) -> float:
        now = time.perf_counter()
        if self.first_start is None:
            self.first_start = now  # a racing first record's start differs by microseconds
        return now

    def _ended(self) -> None:
        now = time.perf_counter()
        count = self.count = next(self._counter)
        if count == self._half:
            self.half_end = now
        if count == self.expected:
            self.last_end = now
            self.done.set()

    def wrap(self, work: Callable[[Any], Any]) -> Callable[[Any], None]:
        """A handler running ``work(record)`` and counting it."""

        def handler(record: Any) -> None:
            self._started()
            work(record)
            self._ended()

        return handler

    def wrap_async(self, work: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[None]]:
        """An ``async def`` handler awaiting ``work(record)`` and counting it."""

        async def handler(record: Any) -> None:
            self._started()
            await work(record)
            self._ended()

        return handler


def run_executor(executor: ShardedExecutor, meter: Meter, timeout_s: float) -> dict[str, float]:
    """Run ``executor`` on a thread until ``meter`` counted its records; stop it; the times:
    ``wall_s`` (``run()`` to the last end), ``processing_s`` (first start to last end),
    ``first_record_s`` (``run()`` to the first start), ``second_half_s`` (the half-way end to
    the last) and ``cpu_s`` (the process CPU time from ``run()`` to the last record, every
    thread's)."""
    started, cpu = time.perf_counter(), time.process_time()
    running = Running(executor)
    try:
        finished = running.wait(meter.done, timeout_s)
        cpu = time.process_time() - cpu
    finally:
        running.stop()
    if running.error is not None:
        raise running.error
    if not finished or meter.first_start is None or meter.half_end is None:
        raise TimeoutError(
            f"handled {meter.count} of {meter.expected} records in {timeout_s:g} s "
            f"(executor stats: {executor.stats()})"
        )
    return {
        "wall_s": meter.last_end - started,
        "processing_s": meter.last_end - meter.first_start,
        "first_record_s": meter.first_start - started,
        "second_half_s": meter.last_end - meter.half_end,
        "cpu_s": cpu,
    }


def plain_loop_rate(
    servers: str, topic: str, count: int, work: Callable[[Any], Any], stall_s: float = 60.0,
) -> float:
    """Records/s of the baseline without an executor: poll, then ``work(record)`` each in turn
    on one thread (what one partition gives a plain consumer), from the first record on; a
    TimeoutError once ``stall_s`` pass without a record."""
    consumer = raw_consumer(servers, [topic])
    try:
        handled, first = 0, None
        progress = time.monotonic()
        while handled < count:
            if time.monotonic() - progress > stall_s:
                raise TimeoutError(
                    f"the plain loop got no record of {topic!r} for {stall_s:g} s, "
                    f"{handled} of {count} handled (assigned {sorted(consumer.assignment())})"
                )
            for records in consumer.poll(timeout_ms=100).values():
                for record in records[: count - handled]:
                    first = first or time.perf_counter()
                    work(record)
                    handled += 1
                progress = time.monotonic()
        assert first is not None
        return count / (time.perf_counter() - first)
    finally:
        consumer.close()
