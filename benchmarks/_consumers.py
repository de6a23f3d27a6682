"""What the consumer benchmarks share: the two consumers, draining, paced senders, latencies.

Every consumer benchmark compares :class:`~priority_kafka.PriorityConsumer` with a raw
kafka-python ``KafkaConsumer`` built from the same settings (:func:`consumer_settings`), each
in a consumer group of its own, so both start from the beginning of the same records, and
each in a fresh process per round (:func:`benchmarks._common.interleave`).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from kafka import KafkaConsumer, KafkaProducer

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
    """A kafka-python ``KafkaConsumer`` subscribed to ``topics``."""
    consumer = KafkaConsumer(**consumer_settings(bootstrap_servers, **overrides))
    consumer.subscribe(list(topics))
    return consumer


def priority_consumer(bootstrap_servers: str, topic: str, **overrides: Any) -> PriorityConsumer:
    """A PriorityConsumer over the ``MAX_PRIORITY`` levels of the logical ``topic``."""
    return PriorityConsumer(
        topic, max_priority=MAX_PRIORITY, **consumer_settings(bootstrap_servers, **overrides)
    )


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


def drain(consumer: Any, total: int, timeout_s: float) -> Drain:
    """Poll ``consumer`` until it has returned ``total`` records; the records are dropped."""
    start, cpu_start = time.perf_counter(), time.process_time()
    deadline = start + timeout_s
    first_at: float | None = None
    count = polls = first_batch = 0
    while count < total:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"read {count} of {total} records in {timeout_s:g} s")
        got = record_count(consumer.poll(timeout_ms=100))
        polls += 1
        if got and first_at is None:
            first_at, first_batch = time.perf_counter(), got
        count += got
    end = time.perf_counter()
    assert first_at is not None
    cpu = time.process_time() - cpu_start
    return Drain(count, polls, end - start, end - first_at, first_batch, cpu)


def read_records(
    bootstrap_servers: str,
    kind: str,
    topics: Sequence[str],
    total: int,
    overrides: Mapping[str, Any],
) -> dict[str, Any]:
    """Contender: a fresh consumer reads ``total`` records; its :class:`Drain` and rates.

    ``kind`` "priority" is a PriorityConsumer over the logical topic ``topics[0]``; "raw" a
    KafkaConsumer subscribed to ``topics``. Either gets a consumer group of its own.
    """
    if kind == "priority":
        consumer = priority_consumer(bootstrap_servers, topics[0], **overrides)
    else:
        consumer = raw_consumer(bootstrap_servers, topics, **overrides)
    try:
        result = drain(consumer, total, timeout_s=max(60.0, total / 2000))
    finally:
        consumer.close()
    return {
        **attrs.asdict(result),
        "rate": result.rate,
        "steady_rate": result.steady_rate,
        "cpu_rate": result.cpu_rate,
    }


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

    ``sides`` maps a name to the ``kind``, ``topics`` and ``overrides`` of :func:`read_records`;
    the first side is the subject and the second the baseline of the ratios: records/s from
    the first poll (top level), once records flow (``steady``) and per CPU second of the
    reading process (``per_cpu_second``); plus each read's polls, seconds, and seconds until its
    first records (the group join(s)), and how the reads were interleaved.
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
    subject, baseline = list(sides)

    def per_round(key: str) -> dict[str, list[float]]:
        return {name: runs.values(name, key) for name in sides}

    return {
        **rate_comparison(runs, "rate", subject, baseline),
        "steady": rate_comparison(runs, "steady_rate", subject, baseline),
        "per_cpu_second": rate_comparison(runs, "cpu_rate", subject, baseline),
        "polls": per_round("polls"),
        "seconds": per_round("seconds"),
        "seconds_to_first_records": {
            name: [r["seconds"] - r["steady_seconds"] for r in runs.results[name]]
            for name in sides
        },
        "interleaving": runs.summary(),
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


def low_latency_producer(bootstrap_servers: str) -> KafkaProducer:
    """A producer that sends each record at once (no linger), as a latency probe needs."""
    return KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=0,
                         acks=replication(bootstrap_servers).acks)


class Pacer(threading.Thread):
    """Sends ``per_tick`` stamped records to ``topic`` every ``interval()`` seconds until stopped.

    The schedule is absolute (tick ``k`` is due at the sum of the first ``k`` intervals), so a
    late tick does not slow the average rate down. The first tick is sent as soon as the
    producer knows the topic's partitions.
    """

    def __init__(
        self,
        producer: KafkaProducer,
        topic: str,
        interval: Callable[[], float],
        per_tick: int = 1,
        size: int = 100,
    ) -> None:
        super().__init__(name=f"pacer-{topic}", daemon=True)
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
            for _ in range(self._per_tick):
                self._producer.send(self._topic, stamped(self._size))
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
