"""When a level's client consumer is polled, and for how much (pure: time is passed in).

One :class:`PollGate` per level decides, for each ``PriorityConsumer.poll()``, whether that
level's kafka-python consumer is polled, with what timeout and for how many records. The
numbers live in :class:`PollTiming`, which tests may replace.
"""

from __future__ import annotations

from collections.abc import Hashable

import attrs

from priority_kafka._checks import check_number, int_at_least

__all__ = ["PollGate", "PollRequest", "PollTiming", "RebalanceWatchdog"]


def _non_negative(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    check_number(attribute.name, value, minimum=0)


@attrs.frozen(kw_only=True)
class PollTiming:
    """The timing of a PriorityConsumer's level polls (milliseconds or seconds as named)."""

    #: While waiting for data, ``poll()`` blocks on the highest level (which wakes it at once)
    #: for at most this long before checking the lower levels again. Longer saves idle CPU
    #: (each kafka-python poll costs about a millisecond), shorter wakes lower levels sooner.
    idle_wake_ms: float = attrs.field(default=100.0, validator=_non_negative)
    #: Each further round that finds nothing anywhere doubles that wait, up to this: a long
    #: idle spell costs few polls, and the first record of any level resets it.
    idle_wake_max_ms: float = attrs.field(default=400.0, validator=_non_negative)
    #: Right after a poll that returned records, lower levels are likely mid-fetch: sooner.
    flowing_wake_ms: float = attrs.field(default=5.0, validator=_non_negative)
    #: A level whose consumer had nothing is not polled again (without waiting) for this long:
    #: an empty kafka-python poll still costs a round trip to its IO thread.
    quiet_backoff_s: float = attrs.field(default=0.01, validator=_non_negative)
    #: Each level's consumer is asked for this many ``max_poll_records`` at a time. Every
    #: kafka-python poll() costs two round trips to its IO thread however few records it
    #: returns; 4 measured best against 1 and 2 (benchmarks/consumer_overhead.py).
    prefetch_polls: int = attrs.field(default=4, validator=int_at_least(1))
    #: A level above the lowest whose poll just returned records waits at most this long for
    #: the fetch that poll sent (a loopback fetch of waiting records answers in 1-4 ms): its
    #: records come with this ``poll()`` and the next fetch is in flight until the next one.
    chase_wait_ms: float = attrs.field(default=5.0, validator=_non_negative)
    #: ...only when the caller took at least this long since the previous ``poll()`` returned:
    #: a record that misses this poll then waits that long again, against the chase's 1-2 ms.
    #: Polled more often, the next poll comes soon anyway, and chasing would slow the reading
    #: (by 30 % at 50 records handled in 5 ms per poll).
    chase_after_gap_ms: float = attrs.field(default=10.0, validator=_non_negative)
    #: ...and for at most this share of that time, so a chase never costs the caller more than
    #: a tenth of its own pace (on a loaded machine a fetch's answer can take longer).
    chase_gap_share: float = attrs.field(default=0.1, validator=_non_negative)

    def chase_ms(self, gap_ms: float) -> float:
        """How long a poll that comes ``gap_ms`` after the previous one returned waits for a
        flowing level's fetch (0: not at all)."""
        if gap_ms < self.chase_after_gap_ms:
            return 0.0
        return min(self.chase_wait_ms, gap_ms * self.chase_gap_share)
    #: kafka-python takes part in a group rebalance only inside poll(): every level's consumer
    #: is polled at least this often, also while its buffer covers its share.
    level_poll_interval_s: float = attrs.field(default=1.0, validator=_non_negative)
    #: A joining level's poll blocks at least this long (``_kafka.JOIN_POLL_MS``: a client
    #: library fact, so it has no default here).
    join_wait_ms: float = attrs.field(validator=_non_negative)
    #: How long a level assigned no partition keeps getting join time: an empty assignment is
    #: often a join that raced the topic's metadata, and another rejoin follows.
    empty_assignment_grace_s: float = attrs.field(default=5.0, validator=_non_negative)

    def wake_ms(self, *, flowing: bool, idle_rounds: int) -> float:
        """How long the highest level blocks before the lower levels are checked again."""
        if flowing:
            return self.flowing_wake_ms
        return min(self.idle_wake_ms * 2 ** min(idle_rounds, 16), self.idle_wake_max_ms)


@attrs.frozen
class PollRequest:
    """Poll a level's consumer now, for up to ``max_records``, blocking up to ``timeout_ms``."""

    timeout_ms: int
    max_records: int


@attrs.define(eq=False)
class PollGate:
    """One level's poll schedule: joining, quiet back-off, and the keep-alive interval.

    Guarantees: a joining level (from a revoke until its next non-empty assignment, and for
    ``empty_assignment_grace_s`` after an empty one) always gets a poll of at least
    ``join_wait_ms``; every level is polled at least every ``level_poll_interval_s``; a level
    that returned nothing is not polled again without waiting within ``quiet_backoff_s``.
    Not thread-safe: the rebalance hooks (IO thread) only flip ``joined`` and the grace time,
    single assignments that the polling thread reads.
    """

    timing: PollTiming
    joined: bool = True
    join_grace_until: float = 0.0
    quiet_until: float = 0.0
    poll_due: float = 0.0

    def request(
        self, now: float, *, wait_ms: float, wanted: bool, buffered: int, chunk: int
    ) -> PollRequest | None:
        """Whether to poll now: ``wait_ms`` is this level's share of the caller's wait (0 for
        all but the first level), ``wanted`` whether its servable records are short of its
        share, ``buffered`` how many records it holds (paused partitions' too), ``chunk`` the
        most it may hold: a poll never asks for more than fills the buffer to ``chunk``, so
        records parked for paused partitions cannot make it grow past that."""
        timeout_ms = wait_ms
        if not self.joined or now < self.join_grace_until:
            timeout_ms = max(timeout_ms, self.timing.join_wait_ms)
        room = chunk - buffered
        wanted = wanted and room > 0
        if timeout_ms or now >= self.poll_due or (wanted and now >= self.quiet_until):
            # A level polled only to keep up with its group (or with a full buffer) takes little.
            return PollRequest(int(timeout_ms), room if wanted else max(1, room))
        return None

    def polled(self, now: float, got_records: bool) -> None:
        """Note a poll made at ``now``."""
        self.poll_due = now + self.timing.level_poll_interval_s
        if not got_records:
            self.quiet_until = now + self.timing.quiet_backoff_s

    def revoked(self) -> None:
        """A rebalance started: the level joins again."""
        self.joined = False

    def assigned(self, now: float, empty: bool) -> None:
        """The rebalance ended; an empty assignment keeps join time for a while."""
        self.joined = True
        self.join_grace_until = now + self.timing.empty_assignment_grace_s if empty else 0.0

    def subscribed(self) -> None:
        """A new subscription: the level has a group to join."""
        self.joined = False

    def assigned_manually(self) -> None:
        """Manual assignment: no group to join."""
        self.joined = True
        self.join_grace_until = 0.0


@attrs.define(eq=False)
class RebalanceWatchdog:
    """Notices a level whose group membership stopped moving while not settled.

    Kafka gives a member ``session_timeout_ms`` to rejoin; a membership that has shown no
    progress (state, generation, member id) for ``limit_s`` while unsettled will not finish on
    its own. ``stalls`` counts the times that happened (a metric).
    """

    limit_s: float
    stalls: int = 0
    _progress: Hashable | None = None
    _since: float = 0.0

    @classmethod
    def for_session(cls, session_timeout_ms: float) -> RebalanceWatchdog:
        """The limit the design gives: ``max(session_timeout_ms, 10 s)``."""
        return cls(max(session_timeout_ms, 10_000) / 1000)

    def stalled(self, now: float, settled: bool, progress: Hashable) -> bool:
        """Note the membership at ``now``; True (once per ``limit_s``) when it is stalled."""
        if settled or progress != self._progress:
            self._progress = progress
            self._since = now
            return False
        if now - self._since < self.limit_s:
            return False
        self._since = now
        self.stalls += 1
        return True
