"""Waking librdkafka's fetcher after partitions are resumed.

librdkafka (2.16) resumes a partition on its main thread by clearing the partition's pause
flag; the thread of the broker that leads the partition is not told. A broker thread with
nothing to fetch (every partition it serves paused) sleeps on its queue for up to a second
(``rd_kafka_max_block_ms``, not configurable), so a resumed partition may be fetched again
only up to a second later. Two things pause every partition of a consumer: librdkafka itself,
around each incremental rebalance (KIP-848 and classic cooperative: ``Pausing fetchers for N
assigned partition(s): incremental rebalance``), and ``pause()`` on all of them (an executor's
back-pressure). Measured: the kept partitions of a level that handed one over to a joining
member were fetched again 1.0 s after librdkafka resumed them (``benchmarks.churn --client
confluent --protocol consumer --librdkafka-debug cgrp,fetch``); after ``pause()`` of every
partition and ``resume()``, the next message came 0.35-0.78 s later, and 0-5 ms with a wake.

Any request to the broker wakes its thread, which then sees the partitions fetchable: a
ListOffsets of the resumed partitions (one request per leader), whose answer is not used. It is
sent from a thread of its own (:class:`FetcherWaker`): on the broker's connection it may wait
behind a long-poll fetch (up to ``fetch.wait.max.ms``), and the consuming thread must not.

Only after rebalances: waking after a ``resume()`` as well (the executor's back-pressure)
raised the executor's level-2 p99 from 9.7 ms to 340-390 ms (``benchmarks.executor_priority
--client confluent``, 1-2 rounds; cause not found), so a level whose partitions were all paused
by the application still waits for its broker thread's next turn.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Sequence
from typing import Any

from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

__all__ = ["FetcherWaker", "wake_fetchers"]

# How long the wake may wait for the leaders' answers: a round trip, or a long-poll fetch ahead
# of it on the connection. A leader that does not answer in time is a wake missed.
_TIMEOUT_S = 1.0


def wake_fetchers(consumer: Any, partitions: Sequence[TopicPartition]) -> None:
    """Make the broker threads that lead ``partitions`` look for fetchable partitions now
    (blocks until the leaders answer, at most ``_TIMEOUT_S``)."""
    if not partitions:
        return
    # A leader unknown or slow to answer is a missed wake, not an error; so is a consumer
    # closed meanwhile (its level renewed): "Consumer closed" had ended the waker's thread,
    # and every later wake with it, in the soak.
    with contextlib.suppress(KafkaException, RuntimeError):
        consumer.offsets_for_times(
            [TopicPartition(tp.topic, tp.partition, OFFSET_END) for tp in partitions],
            timeout=_TIMEOUT_S,
        )


class FetcherWaker:
    """Wakes fetchers (:func:`wake_fetchers`) on a daemon thread, started at the first wake; the
    latest partitions asked for each consumer replace those still waiting. :meth:`close` before
    closing the consumers: it waits for a wake in progress (at most ``_TIMEOUT_S``)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._ready = threading.Condition()
        self._waiting: dict[int, tuple[Any, list[TopicPartition]]] = {}
        self._thread: threading.Thread | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"FetcherWaker({self._name!r}, waiting={len(self._waiting)})"

    def wake(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        """Wake the fetchers of ``consumer``'s ``partitions`` soon; returns at once."""
        if not partitions:
            return
        with self._ready:
            if self._closed:
                return
            self._waiting[id(consumer)] = (consumer, partitions)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._ready.notify()

    def wake_levels(self, levels: set[Any], paused: Collection[tuple[str, int]]) -> None:
        """Wake the fetchers of ``levels`` (each with a ``consumer``) for their assigned
        partitions not ``paused`` (``(topic, partition)``), and empty ``levels``."""
        for lv in levels:
            self.wake(lv.consumer, [
                tp for tp in lv.consumer.assignment() if (tp.topic, tp.partition) not in paused
            ])
        levels.clear()

    def close(self) -> None:
        """Stop: no wake after this returns."""
        with self._ready:
            self._closed = True
            self._waiting.clear()
            self._ready.notify()
            thread = self._thread
        if thread is not None:
            thread.join(_TIMEOUT_S + 1)

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._waiting and not self._closed:
                    self._ready.wait()
                if self._closed:
                    return
                _, (consumer, partitions) = self._waiting.popitem()
            wake_fetchers(consumer, partitions)
