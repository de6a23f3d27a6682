"""What the consumer benchmarks share: the two consumers, draining, paced senders, latencies.

Every consumer benchmark compares :class:`~priority_kafka.PriorityConsumer` with a raw
kafka-python ``KafkaConsumer`` built from the same settings (:func:`consumer_settings`), each
in a consumer group of its own, so both start from the beginning of the same records.
"""

from __future__ import annotations

import statistics
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
from kafka import KafkaConsumer, KafkaProducer

from benchmarks._common import percentile, unique
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


def alternate(runs: Mapping[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Call each run ``repeats`` times, reversing the order every round (a noisy machine)."""
    names = list(runs)
    results: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        for name in names if round_ % 2 == 0 else names[::-1]:
            results[name].append(runs[name]())
    return results


def rate_comparison(rates: Mapping[str, Sequence[float]], subject: str, baseline: str) -> dict:
    """Medians of the repeated rates and the subject/baseline ratio (median, and per round)."""
    medians = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "rates": {name: list(values) for name, values in rates.items()},
        "median_rates": medians,
        "ratio": medians[subject] / medians[baseline],
        "ratio_per_round": [s / b for s, b in zip(rates[subject], rates[baseline], strict=True)],
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
    return KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=0, acks=1)


class Pacer(threading.Thread):
    """Sends ``per_tick`` stamped records to ``topic`` every ``interval()`` seconds until stopped.

    The schedule is absolute (tick ``k`` is due at the sum of the first ``k`` intervals), so a
    late tick does not slow the average rate down. The first tick is sent at once.
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


def latency_summary(seconds: Iterable[float]) -> dict[str, float]:
    """Count, p50, p99 and max of latencies, in milliseconds."""
    ms = [s * 1000 for s in seconds]
    return {
        "count": len(ms),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else float("nan"),
    }


def plot_cdf(ax: Any, seconds: Sequence[float], label: str) -> None:
    """Add the empirical CDF of latencies (given in seconds, drawn in ms, log x axis) to ``ax``."""
    ms = sorted(s * 1000 for s in seconds)
    if not ms:
        return
    fractions = [(i + 1) / len(ms) for i in range(len(ms))]
    ax.step(ms, fractions, where="post", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("fraction of records")
    ax.grid(True, which="both", alpha=0.3)
