"""The rounds of a kafka-python PriorityConsumer's ``poll()``: refill, allocate, take.

A round goes once over the active levels, highest first: each level polls its consumer when its
gate says so, :func:`~priority_kafka.burst.allocate` splits the poll's total over what the
levels hold under the poll's quotas, and each level hands out its allocation. ``poll()`` runs
rounds until one returns records or its timeout ends; :class:`PollRounds` also feeds what was
returned to the burst windows and publishes the levels' figures. Polling thread only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from priority_kafka._levels import Published, publish
from priority_kafka.burst import CapacityBurst, allocate
from priority_kafka.kafka_python.consumer._level import Level, Records
from priority_kafka.kafka_python.consumer._polling import PollTiming

__all__ = ["PollRounds"]

# Longest single wait on a lone active level (poll() loops until its own timeout).
_SINGLE_LEVEL_SLICE_MS = 60_000


class PollRounds:
    """Serves ``poll()`` from the ``levels`` (highest first) under ``burst``'s quotas."""

    def __init__(
        self,
        levels: Mapping[int, Level],
        burst: CapacityBurst,
        timing: PollTiming,
        max_poll_records: int,
        level_of: Callable[[str], int],
    ) -> None:
        self._levels = levels
        self._burst = burst
        self._timing = timing
        self._max_poll_records = max_poll_records
        self._level_of = level_of
        self._flowing = False  # whether the last poll returned records
        self._idle_rounds = 0  # waits in a row that found nothing on any level
        self._returned_at = 0.0  # when the last collect() returned (monotonic)
        #: The levels' figures as of the last poll (see :meth:`publish`).
        self.published: Published = self.publish()

    def collect(
        self, active: Sequence[Level], timeout_ms: float, total: int
    ) -> tuple[Records, dict[int, int]]:
        """One poll's undeserialized records (at most ``total``), and the quotas they were
        served under: rounds until one returns records or ``timeout_ms`` has passed."""
        quotas = self._burst.quotas()
        now = time.monotonic()
        deadline = now + timeout_ms / 1000
        chase_ms = self._timing.chase_ms((now - self._returned_at) * 1000)
        records = self.once(active, quotas, total, wait_ms=0, chase_ms=chase_ms)
        while not records:
            remaining_ms = (deadline - time.monotonic()) * 1000
            if remaining_ms <= 0:
                break
            wake_ms = self._timing.wake_ms(flowing=self._flowing, idle_rounds=self._idle_rounds)
            self._idle_rounds += 1
            # One level has nothing else to check, but it waits in bounded slices (timeout_ms
            # may be infinite).
            wait_ms = min(remaining_ms, _SINGLE_LEVEL_SLICE_MS if len(active) == 1 else wake_ms)
            records = self.once(active, quotas, total, wait_ms=int(wait_ms) or 1,
                                chase_ms=chase_ms)
        self._returned_at = time.monotonic()
        return records, quotas

    def once(
        self, active: Sequence[Level], quotas: Mapping[int, int], total: int, wait_ms: int,
        chase_ms: float = 0.0,
    ) -> Records:
        """Refill, allocate, take: one round over the levels, highest first.

        1. Refill: each level polls its consumer when its gate says so (its buffer is short of
           its share, it is joining, or it was not polled for a while); only the first level
           may block (``wait_ms``), so a high-priority record wakes the wait at once. Given
           ``chase_ms`` (the caller was away for a while), each level above the lowest whose
           poll returned records then waits up to that long for the fetch that poll sent
           (:meth:`Level.chase`): what reached the broker since is in this round.
        2. Allocate: :func:`~priority_kafka.burst.allocate` splits ``total`` over what each
           level has buffered, under this poll's quotas.
        3. Take: each level's allocation, highest level first.

        Nothing is taken before every poll has returned, so a failing poll loses nothing.
        """
        chunk = self._timing.prefetch_polls * self._max_poll_records
        for index, lv in enumerate(active):
            lv.refill(
                wait_ms=wait_ms if index == 0 else 0,
                share=min(quotas[lv.level], total),
                chunk=chunk,
            )
        # The lower levels' refills gave the higher levels' fetches time to be answered.
        for lv in active[:-1] if chase_ms else ():
            lv.chase(share=min(quotas[lv.level], total), wait_ms=chase_ms)
        admitted = allocate(
            {lv.level: quotas[lv.level] for lv in active},
            {lv.level: lv.available() for lv in active},
            total,
            self._burst.bursting_level,
        )
        records: Records = {}
        for lv in active:
            if admitted[lv.level]:
                records.update(lv.take(admitted[lv.level]))
        return records

    def account(self, records: Records, quotas: Mapping[int, int]) -> None:
        """Feed what a poll returned to the burst windows and the figures."""
        self._flowing = bool(records)
        if records:
            self._idle_rounds = 0
        counts = dict.fromkeys(self._levels, 0)
        for tp, batch in records.items():
            counts[self._level_of(tp.topic)] += len(batch)
        self._burst.record(counts)
        for number, level in self._levels.items():
            level.last_quota = quotas[number]
            level.returned += counts[number]
        self.published = self.publish()

    def publish(self) -> Published:
        """The levels' figures now. Assigned to :attr:`published` in one reference swap: other
        threads see the old or the new snapshot, never half of one."""
        levels = self._levels.items()
        return publish(
            self._burst,
            {number: level.last_quota for number, level in levels},
            {number: level.returned for number, level in levels},
            {number: len(level.buffer) for number, level in levels},
            {number: level.watchdog.stalls for number, level in levels},
            {number: len(level.consumer.paused()) for number, level in levels},
        )
