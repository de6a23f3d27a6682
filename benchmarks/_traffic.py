"""Keyed traffic for the fault scenarios and the soak: a producer sending ``level:key:seq``
records in the background, and a tally of what was sent, acknowledged and handled, from which
lost records, duplicates, order and recovery follow.

Values are ``level:key:seq`` (``seq`` counting per level and key), so every record is unique
and names its own place in its key's order. The tally also keeps each record's send time and
partition, from which the latency of a level over a window and, per partition, the first
record sent after a fault and handled follow. Here, beside the benchmarks, as the soak
(benchmarks/_soak.py) runs it and the tests import benchmarks, never the other way.
"""

from __future__ import annotations

import bisect
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from priority_kafka import PriorityProducer
from priority_kafka.families import Family
from priority_kafka.families import family as registered

__all__ = ["LEVELS", "Producing", "Tally", "harnessed"]

LEVELS = 3


class Tally:
    """Sent, acknowledged and handled records (by value) with their monotonic times."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: dict[str, float] = {}
        self.acked: set[str] = set()
        #: The partition each acknowledged record was written to (of its level's topic).
        self.acked_partition: dict[str, int] = {}
        self.failed: dict[str, str] = {}
        self.handled: Counter[str] = Counter()
        self.first_handled: dict[str, float] = {}
        #: Per (level, partition), (handled, sent) times of its records in the order handled.
        self._handled_log: dict[tuple[int, int], list[tuple[float, float]]] = {}
        self.order_violations = 0
        self._highest: dict[tuple[str, str], int] = {}

    def handle(self, value: str, partition: int = -1, at: float | None = None) -> None:
        """Note that a handler got ``value`` (from ``partition`` of its level) at monotonic
        time ``at`` (now if not given: a handler in this process); a key's new records must
        come in seq order."""
        now = time.monotonic() if at is None else at
        with self.lock:
            self.handled[value] += 1
            if value in self.first_handled:
                return  # a replay: a duplicate, not a reordering
            self.first_handled[value] = now
            level, key, seq = value.split(":")
            self._handled_log.setdefault((int(level), partition), []).append(
                (now, self.sent.get(value, 0.0)))
            if int(seq) < self._highest.get((level, key), -1):
                self.order_violations += 1
            self._highest[(level, key)] = max(int(seq), self._highest.get((level, key), -1))

    def handled_count(self) -> int:
        with self.lock:
            return len(self.first_handled)

    def all_acked_handled(self) -> bool:
        with self.lock:
            return self.acked <= self.first_handled.keys()

    def first_handled_after(self, moment: float) -> float | None:
        """Seconds from ``moment`` to the first record handled after it."""
        with self.lock:
            after = [t for t in self.first_handled.values() if t > moment]
        return min(after) - moment if after else None

    def caught_up_after(self, moment: float) -> float | None:
        """Seconds from ``moment`` until every record sent before it was handled."""
        with self.lock:
            before = [v for v, t in self.sent.items() if t <= moment and v not in self.failed]
            if not all(v in self.first_handled for v in before):
                return None
            return max([self.first_handled[v] for v in before] + [moment]) - moment

    def first_sent_after(self, moment: float) -> dict[tuple[int, int], float]:
        """Per (level, partition): seconds from ``moment`` until the first record *sent* after
        it was handled (a backlog handled after ``moment`` does not count: it was on its way
        before). Partitions without such a record yet are missing."""
        first: dict[tuple[int, int], float] = {}
        with self.lock:
            for where, log in self._handled_log.items():
                # Handled in (nearly) time order: records handled before moment - 1 s cannot
                # have been sent after it.
                start = bisect.bisect_left(log, (moment - 1.0,))
                found = next((handled for handled, sent in log[start:] if sent > moment), None)
                if found is not None:
                    first[where] = found - moment
        return first

    def since(self, moment: float) -> dict[tuple[int, int] | str, dict[str, int]]:
        """What became of the records sent after ``moment``: per (level, partition) they were
        acknowledged on, how many were acknowledged and handled; under "unacknowledged", per
        level, how many are still waiting for an acknowledgement (or failed)."""
        seen: dict[tuple[int, int] | str, dict[str, int]] = {}
        with self.lock:
            for value, sent in self.sent.items():
                if sent <= moment:
                    continue
                level = int(value.split(":", 1)[0])
                if value in self.acked_partition:
                    row = seen.setdefault((level, self.acked_partition[value]),
                                          {"acked": 0, "handled": 0})
                    row["acked"] += 1
                    row["handled"] += value in self.first_handled
                else:
                    waiting = seen.setdefault("unacknowledged", {})
                    waiting[str(level)] = waiting.get(str(level), 0) + 1
        return seen

    def latencies_ms(self, level: int, windows: Iterable[tuple[float, float]]) -> list[float]:
        """Send-to-handler milliseconds of ``level``'s records sent within any of ``windows``
        (first handling; records not handled are not in it)."""
        spans = list(windows)
        prefix = f"{level}:"
        with self.lock:
            return [(self.first_handled[v] - sent) * 1000 for v, sent in self.sent.items()
                    if v.startswith(prefix) and v in self.first_handled
                    and any(start <= sent < end for start, end in spans)]

    def figures(self) -> dict[str, Any]:
        with self.lock:
            return {
                "produced": len(self.acked),
                "send_failures": len(self.failed),
                "handled": len(self.first_handled),
                "lost": len(self.acked - self.first_handled.keys()),
                "duplicates": sum(self.handled.values()) - len(self.handled),
                "order_violations": self.order_violations,
            }


class _RetryCounter(logging.Handler):
    """Counts the produce errors a producer logs and retries, by error name: kafka-python's
    sender warns ``... retrying (N attempts left): <Error>``, librdkafka (``debug=msg``) logs
    ``MessageSet ... encountered error: <reason>``."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.errors: Counter[str] = Counter()

    _PATTERN = re.compile(r"attempts left\): (\w+)|encountered error: ([^(]+?)(?: \(|$)")

    def emit(self, record: logging.LogRecord) -> None:
        found = self._PATTERN.search(record.getMessage())
        if found:
            self.errors[(found.group(1) or found.group(2)).strip()] += 1


def harnessed(client: str) -> Family:
    """The family called ``client``, which this harness builds clients of: a synchronous one
    (kafka-python's calls or librdkafka's); ValueError naming any other."""
    one = registered(client)
    if not one.synchronous:
        raise ValueError(f"the fault harness builds synchronous clients, not {client}'s")
    return one


class Producing:
    """Send ``level:key:seq`` records at ``rate`` per second on a thread until stop(), with
    the ``client`` family's PriorityProducer (kafka-python, or confluent with ``acks=all``
    and idempotence, as recommended); ``configs`` go to the kafka-python one.
    ``retried_errors`` counts the produce errors the producer retried, by name."""

    def __init__(
        self, bootstrap: str, topic: str, tally: Tally, rate: float, keys: int = 20,
        limit: int | None = None, client: str = "kafka-python", **configs: Any,
    ) -> None:
        self.tally = tally
        self._retries = _RetryCounter()
        self._librdkafka = harnessed(client).librdkafka
        if not self._librdkafka:
            self._logger = logging.getLogger("kafka.producer.sender")
            self._producer: Any = PriorityProducer(
                max_priority=LEVELS, bootstrap_servers=bootstrap, linger_ms=5, **configs
            )
        else:
            from priority_kafka.confluent import PriorityProducer as ConfluentProducer

            self._logger = logging.getLogger(f"tests.faults.librdkafka.{id(self)}")
            self._logger.setLevel(logging.DEBUG)
            self._logger.propagate = False  # counted, not printed: debug=msg is verbose
            self._producer = ConfluentProducer({
                "bootstrap.servers": bootstrap, "max.priority": LEVELS, "linger.ms": 5,
                "acks": "all", "enable.idempotence": True, "debug": "msg",
                "logger": self._logger,
            })
        self._logger.addHandler(self._retries)
        self._topic, self._rate, self._keys, self._limit = topic, rate, keys, limit
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def retried_errors(self) -> dict[str, int]:
        return dict(self._retries.errors)

    def _send(self, level: int, key: int, value: str) -> None:
        if not self._librdkafka:
            future = self._producer.send(
                self._topic, key=str(key).encode(), value=value.encode(), priority=level
            )
            future.add_callback(lambda metadata: self._acked(value, metadata.partition))
            future.add_errback(self._failed, value)
            return

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                self._acked(value, message.partition())
            else:
                self._failed(value, error)

        self._producer.produce(self._topic, value.encode(), str(key).encode(),
                               on_delivery=delivered, priority=level)
        self._producer.poll(0)

    def _run(self) -> None:
        seq: Counter[tuple[int, int]] = Counter()
        start = time.monotonic()
        i = 0
        try:
            while not self._stop.is_set() and (self._limit is None or i < self._limit):
                level, key = i % LEVELS, (i // LEVELS) % self._keys
                value = f"{level}:{key}:{seq[(level, key)]}"
                seq[(level, key)] += 1
                with self.tally.lock:
                    self.tally.sent[value] = time.monotonic()
                self._send(level, key, value)
                i += 1
                pause = start + i / self._rate - time.monotonic()
                if pause > 0:
                    self._stop.wait(pause)
        except BaseException as exc:
            self.error = exc

    def _acked(self, value: str, partition: int) -> None:
        with self.tally.lock:
            self.tally.acked.add(value)
            self.tally.acked_partition[value] = partition

    def _failed(self, value: str, error: BaseException) -> None:
        with self.tally.lock:
            self.tally.failed[value] = repr(error)

    def done(self) -> bool:
        return not self._thread.is_alive()

    def stop(self) -> None:
        """Stop sending, wait for every acknowledgement (or failure), close the producer."""
        self._stop.set()
        self._thread.join(30)
        try:
            if not self._librdkafka:
                try:
                    self._producer.flush(timeout=150)
                finally:
                    self._producer.close(timeout=10)  # bounded: a failed run ends, not hangs
            else:
                assert self._producer.flush(150) == 0, "confluent records left unsent"
        finally:
            self._logger.removeHandler(self._retries)
        assert self.error is None, f"the producer thread failed: {self.error!r}"
