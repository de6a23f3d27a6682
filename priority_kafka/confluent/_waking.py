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
ListOffsets of the resumed partitions (one request per leader), whose answer is not used.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

__all__ = ["wake_fetchers"]

# How long the wake may wait for the leaders' answers: a round trip, normally. A leader that
# does not answer in time costs the wait; its fetcher wakes on its own within a second.
_TIMEOUT_S = 0.5


def wake_fetchers(consumer: Any, partitions: Sequence[TopicPartition]) -> None:
    """Make the broker threads that lead ``partitions`` look for fetchable partitions now."""
    if not partitions:
        return
    # A leader unknown or slow to answer is a missed wake, not an error.
    with contextlib.suppress(KafkaException):
        consumer.offsets_for_times(
            [TopicPartition(tp.topic, tp.partition, OFFSET_END) for tp in partitions],
            timeout=_TIMEOUT_S,
        )
