"""What the consumer benchmarks share: the consumers, draining, paced senders, latencies.

Every consumer benchmark compares a PriorityConsumer with the raw consumer of the same client
family built from the same settings, each in a consumer group of its own, so both start from
the beginning of the same records, and each in a fresh process per round
(:func:`benchmarks._common.interleave`). On kafka-python: :class:`~priority_kafka.PriorityConsumer`
and ``KafkaConsumer`` (:func:`consumer_settings`); on confluent-kafka (``--client``,
:mod:`benchmarks._clients`): :class:`priority_kafka.confluent.PriorityConsumer` and
``confluent_kafka.Consumer`` (:func:`confluent_consumer`).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from benchmarks._clients import check_client
from benchmarks._code import family, library_module
from benchmarks._common import (
    Contender,
    Interleaved,
    interleave,
    new_figure,
    percentile,
    replication,
    save_figure,
    unique,
)
from priority_kafka.naming import priority_topics

if TYPE_CHECKING:  # kafka-python is imported where used: see benchmarks._common
    from kafka import KafkaConsumer

    from priority_kafka import PriorityConsumer

#: kafka-python's default batch, the same total for both consumers.
MAX_POLL_RECORDS = 500
MAX_PRIORITY = 3
#: First byte of a record sent by a :class:`Pacer`; preloaded records are all ``b"x"``.
STAMP_MARK = b"S"
_STAMP = struct.Struct(">d")


def consumer_settings(bootstrap_servers: str, **overrides: Any) -> dict[str, Any]:
    """kafka-python consumer settings shared by both sides: a fresh group, read from the start."""
    return {
        "bootstrap_servers": bootstrap_servers,
        "group_id": unique("bench"),
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "max_poll_records": MAX_POLL_RECORDS,
        **overrides,
    }


def raw_consumer(bootstrap_servers: str, topics: Sequence[str], **overrides: Any) -> KafkaConsumer:
    """A kafka-python ``KafkaConsumer`` subscribed to ``topics``, whose every ``poll()`` is
    followed by ``keep_pending_join`` (what a PriorityConsumer level does).

    kafka-python 3.0.12 forgets a rejoin that finishes after the poll that started it returned
    (``priority_kafka.kafka_python._kafka.FORGETS_PENDING_JOIN``), and a fresh group's first
    join, when it comes before the consumer has the just-created topic's metadata, assigns
    nothing and is redone at once: a raw consumer then sat with no partitions for ever, so a
    baseline hung (the plain loop of ``test_executor_seed_smoke``, 2 of ~30 CI runs; 5 of 176
    plain loops beside two others and a busy core, every stack in ``Fetcher.send_fetches``).
    """
    from kafka import KafkaConsumer

    edge = library_module("priority_kafka.kafka_python._kafka")  # an older --code: its path
    consumer = KafkaConsumer(**consumer_settings(bootstrap_servers, **overrides))
    consumer.subscribe(list(topics))
    return edge.keeping_pending_join(consumer)  # type: ignore[no-any-return]


def priority_consumer(bootstrap_servers: str, topic: str, **overrides: Any) -> PriorityConsumer:
    """A PriorityConsumer over the ``MAX_PRIORITY`` levels of the logical ``topic``."""
    from priority_kafka import PriorityConsumer

    return PriorityConsumer(
        topic, max_priority=MAX_PRIORITY, **consumer_settings(bootstrap_servers, **overrides)
    )


def confluent_consumer(
    bootstrap_servers: str,
    topics: Sequence[str],
    *,
    levels: bool,
    max_poll_records: int = MAX_POLL_RECORDS,
    **properties: Any,
) -> Any:
    """A confluent-kafka consumer in a fresh group, subscribed; librdkafka's defaults unless
    ``properties`` (librdkafka names) say otherwise.

    With ``levels``, a :class:`priority_kafka.confluent.PriorityConsumer` over the
    ``MAX_PRIORITY`` levels of the logical topic ``topics[0]`` (``max.poll.records``
    ``max_poll_records``); else a ``confluent_kafka.Consumer`` of ``topics``.
    """
    from confluent_kafka import Consumer

    from priority_kafka.confluent import PriorityConsumer as ConfluentPriorityConsumer

    common = {"bootstrap.servers": bootstrap_servers, "group.id": unique("bench"), **properties}
    consumer: Any
    if levels:
        consumer = ConfluentPriorityConsumer({
            **common, "max.priority": MAX_PRIORITY, "max.poll.records": max_poll_records,
        })
        consumer.subscribe([topics[0]])
    else:
        consumer = Consumer(common)
        consumer.subscribe(list(topics))
    return consumer


def wait_assigned(consumer: Any, partitions: int, timeout_s: float = 30.0) -> None:
    """Poll (nothing is expected yet) until ``partitions`` partitions are assigned."""
    deadline = time.monotonic() + timeout_s
    while len(consumer.assignment()) < partitions:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not assigned {partitions} partitions within {timeout_s:g} s")
        if consumer.poll(timeout_ms=100):
            raise AssertionError("records arrived before the benchmark sent any")


def record_count(batch: Mapping[Any, Sequence[Any]]) -> int:
    """Number of records in a ``poll()`` result."""
    return sum(len(records) for records in batch.values())


@attrs.frozen
class Drain:
    """How long one consumer took to read a known number of records."""

    records: int
    polls: int
    #: From the first ``poll()`` call (group join included) to the poll returning the last record.
    seconds: float
    #: From the return of the first non-empty poll to the poll returning the last record.
    steady_seconds: float
    first_batch: int
    #: CPU time of the whole process (every thread) over ``seconds``: less noisy than wall time.
    cpu_seconds: float
    #: The same over ``steady_seconds``.
    steady_cpu_seconds: float

    @property
    def rate(self) -> float:
        """Records per second, group join included."""
        return self.records / self.seconds

    @property
    def steady_rate(self) -> float:
        """Records per second once records flow (the first batch excluded)."""
        return (self.records - self.first_batch) / self.steady_seconds

    @property
    def cpu_rate(self) -> float:
        """Records per CPU second of the process."""
        return self.records / self.cpu_seconds

    @property
    def steady_cpu_rate(self) -> float:
        """Records per CPU second once records flow (the first batch excluded)."""
        return (self.records - self.first_batch) / self.steady_cpu_seconds


def drain(take: Callable[[], int], total: int, timeout_s: float) -> Drain:
    """Call ``take`` (one poll of a consumer: how many records it returned; they are dropped)
    until ``total`` records came."""
    start, cpu_start = time.perf_counter(), time.process_time()
    deadline = start + timeout_s
    first_at: float | None = None
    first_cpu = 0.0
    count = polls = first_batch = 0
    while count < total:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"read {count} of {total} records in {timeout_s:g} s")
        got = take()
        polls += 1
        if got and first_at is None:
            first_at, first_cpu, first_batch = time.perf_counter(), time.process_time(), got
        count += got
    end, cpu_end = time.perf_counter(), time.process_time()
    assert first_at is not None
    return Drain(
        count, polls, end - start, end - first_at, first_batch, cpu_end - cpu_start,
        cpu_end - first_cpu,
    )


def read_records(
    bootstrap_servers: str,
    kind: str,
    topics: Sequence[str],
    total: int,
    overrides: Mapping[str, Any],
    client: str = "kafka-python",
) -> dict[str, Any]:
    """Contender: a fresh consumer reads ``total`` records; its :class:`Drain` and rates.

    ``kind`` "priority" is a PriorityConsumer over the logical topic ``topics[0]``; "raw" the
    client's plain consumer subscribed to ``topics``. Either gets a consumer group of its own.
    On kafka-python, ``overrides`` are KafkaConsumer settings and each poll is
    ``poll(timeout_ms=100)``; on confluent, ``overrides`` may only hold ``max_poll_records``
    (500), each call is ``consume(max_poll_records, 1.0)``, the rest librdkafka's defaults.
    """
    check_client(client)
    levels = kind == "priority"
    if not family(client).librdkafka:
        if levels:
            consumer = priority_consumer(bootstrap_servers, topics[0], **overrides)
        else:
            consumer = raw_consumer(bootstrap_servers, topics, **overrides)
        poll = consumer.poll

        def take() -> int:
            return record_count(poll(timeout_ms=100))
    else:
        batch = overrides.get("max_poll_records", MAX_POLL_RECORDS)
        consumer = confluent_consumer(
            bootstrap_servers, topics, levels=levels, max_poll_records=batch,
            **{"auto.offset.reset": "earliest"},
        )
        consume = consumer.consume

        def take() -> int:
            return len(consume(batch, 1.0))
    try:
        result = drain(take, total, timeout_s=max(300.0, total / 1000))
    finally:
        consumer.close()
    return {
        **attrs.asdict(result),
        "rate": result.rate,
        "steady_rate": result.steady_rate,
        "cpu_rate": result.cpu_rate,
        "steady_cpu_rate": result.steady_cpu_rate,
    }


def read_levels(
    client: str, side: str, bootstrap_servers: str, topic: str, total: int,
    max_poll_records: int = MAX_POLL_RECORDS,
) -> dict[str, Any]:
    """Contender: :func:`read_records` of the ``MAX_PRIORITY`` levels of the logical ``topic``
    on ``client``: side "priority" reads them through a PriorityConsumer, "raw" subscribes the
    client's plain consumer to the level topics."""
    topics = [topic] if side == "priority" else priority_topics(topic, MAX_PRIORITY)
    return read_records(
        bootstrap_servers, side, topics, total, {"max_poll_records": max_poll_records}, client
    )


def rate_comparison(
    runs: Interleaved, key: str, subject: str, baseline: str
) -> dict[str, Any]:
    """Per-round rates (``key`` of the results), their medians, and the subject/baseline ratio
    per round with its median (``ratio``), min and max."""
    compared = runs.compare(key, subject, baseline)
    return {
        "rates": compared.pop("per_round"),
        "median_rates": compared.pop("medians"),
        **compared,
    }


def compare_drains(
    bootstrap_servers: str,
    sides: Mapping[str, tuple[str, Sequence[str], Mapping[str, Any]]],
    total: int,
    rounds: int,
) -> dict[str, Any]:
    """Read ``total`` records with each side's consumer, a fresh process per read, interleaved.

    ``sides`` maps a name to the ``kind``, ``topics`` and ``overrides`` of :func:`read_records`
    (kafka-python); the first side is the subject and the second the baseline of the ratios
    (:func:`drain_comparison`); ``interleaving`` says how the reads were interleaved.
    """
    runs = interleave(
        [
            Contender(name, read_records, {
                "bootstrap_servers": bootstrap_servers, "kind": kind, "topics": list(topics),
                "total": total, "overrides": dict(overrides),
            })
            for name, (kind, topics, overrides) in sides.items()
        ],
        rounds,
    )
    return {**drain_comparison(runs, *sides), "interleaving": runs.summary()}


def drain_comparison(runs: Interleaved, subject: str, baseline: str) -> dict[str, Any]:
    """The ratios subject / baseline of :func:`read_records` contenders: records/s from the
    first poll (top level), once records flow (``steady``), per CPU second of the reading
    process (``per_cpu_second``) and per CPU second once records flow (``steady_per_cpu_second``);
    plus each read's polls, seconds, and seconds until its first records (the group join(s))."""
    names = (subject, baseline)

    def per_round(key: str) -> dict[str, list[float]]:
        return {name: runs.values(name, key) for name in names}

    return {
        **rate_comparison(runs, "rate", subject, baseline),
        "steady": rate_comparison(runs, "steady_rate", subject, baseline),
        "per_cpu_second": rate_comparison(runs, "cpu_rate", subject, baseline),
        "steady_per_cpu_second": rate_comparison(runs, "steady_cpu_rate", subject, baseline),
        "polls": per_round("polls"),
        "seconds": per_round("seconds"),
        "seconds_to_first_records": {
            name: [r["seconds"] - r["steady_seconds"] for r in runs.results[name]]
            for name in names
        },
    }


def stamped(size: int) -> bytes:
    """A ``size``-byte value carrying the time it was made (``time.perf_counter()``)."""
    head = STAMP_MARK + _STAMP.pack(time.perf_counter())
    return head + b"s" * max(0, size - len(head))


def is_stamped(value: bytes) -> bool:
    """True for a value made by :func:`stamped`."""
    return value[:1] == STAMP_MARK


def stamp_of(value: bytes) -> float:
    """The ``time.perf_counter()`` at which :func:`stamped` made ``value``."""
    return float(_STAMP.unpack_from(value, 1)[0])


def low_latency_producer(bootstrap_servers: str, client: str = "kafka-python") -> Any:
    """A producer that sends each record at once (no linger), as a latency probe needs: on
    kafka-python a ``KafkaProducer``, on confluent a :class:`ConfluentSender`."""
    check_client(client)
    if family(client).librdkafka:
        return ConfluentSender(bootstrap_servers)
    from kafka import KafkaProducer

    return KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=0,
                         acks=replication(bootstrap_servers).acks)


class ConfluentSender:
    """A ``confluent_kafka.Producer`` (``linger.ms`` 0) with the calls :class:`Pacer` makes of a
    ``KafkaProducer``: ``partitions_for``, ``send``, ``flush``, ``close``."""

    def __init__(self, bootstrap_servers: str) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(
            {"bootstrap.servers": bootstrap_servers, "linger.ms": 0,
             "acks": replication(bootstrap_servers).acks}
        )

    def partitions_for(self, topic: str) -> set[int]:
        """The topic's partitions (fetching its metadata, so the first send does not wait)."""
        return set(self._producer.list_topics(topic, timeout=10).topics[topic].partitions)

    def send(self, topic: str, value: bytes, key: bytes | None = None) -> None:
        """Queue ``value`` (keyed ``key``) for ``topic``; serve delivery reports without
        waiting."""
        self._producer.produce(topic, value, key)
        self._producer.poll(0)

    def flush(self) -> None:
        """Wait until every record sent is acknowledged."""
        self._producer.flush()

    def close(self) -> None:
        """Flush (librdkafka's producer has nothing else to close)."""
        self.flush()


class Pacer(threading.Thread):
    """Sends ``per_tick`` stamped records to ``topic`` every ``interval()`` seconds until stopped,
    through ``producer`` (a ``KafkaProducer``, or a :class:`ConfluentSender`).

    The schedule is absolute (tick ``k`` is due at the sum of the first ``k`` intervals), so a
    late tick does not slow the average rate down. The first tick is sent as soon as the
    producer knows the topic's partitions. ``keys``: records without a key (0), or keyed by
    turns with ``keys`` distinct keys.
    """

    def __init__(
        self,
        producer: Any,
        topic: str,
        interval: Callable[[], float],
        per_tick: int = 1,
        size: int = 100,
        keys: int = 0,
    ) -> None:
        super().__init__(name=f"pacer-{topic}", daemon=True)
        self._keys = keys
        self._producer = producer
        self._topic = topic
        self._interval = interval
        self._per_tick = per_tick
        self._size = size
        self._stopping = threading.Event()
        self.sent = 0

    def run(self) -> None:
        # Fetch the topic's metadata first: the first send must not wait for it (~100 ms).
        self._producer.partitions_for(self._topic)
        due = time.perf_counter()
        while not self._stopping.is_set():
            for index in range(self.sent, self.sent + self._per_tick):
                key = f"k{index % self._keys}".encode() if self._keys else None
                self._producer.send(self._topic, stamped(self._size), key=key)
            self.sent += self._per_tick
            due += self._interval()
            self._stopping.wait(max(0.0, due - time.perf_counter()))

    def finish(self) -> int:
        """Stop, wait until every record sent is acknowledged, and return how many were sent."""
        self._stopping.set()
        self.join()
        self._producer.flush()
        return self.sent

    def finish_if_running(self) -> None:
        """Finish a pacer that a failed measurement left sending."""
        if self.is_alive():
            self.finish()


def latency_summary(seconds: Iterable[float]) -> dict[str, float]:
    """Count, p50, p99 and max of latencies, in milliseconds."""
    ms = [s * 1000 for s in seconds]
    return {
        "count": len(ms),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else float("nan"),
    }


def plot_cdfs(path: Path, latencies: Mapping[str, Sequence[float]], title: str) -> None:
    """Save the empirical CDFs of latencies (seconds; drawn in ms on a log axis), one per label.

    Each label gets its p99 appended.
    """
    _, ax = new_figure(figsize=(7, 4.5))
    for label, seconds in latencies.items():
        ms = sorted(s * 1000 for s in seconds)
        if ms:
            fractions = [(i + 1) / len(ms) for i in range(len(ms))]
            ax.step(ms, fractions, where="post", label=f"{label} (p99 {percentile(ms, 99):.1f} ms)")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("fraction of records")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15))  # below: the curves fill the axes
    save_figure(ax.figure, path)
