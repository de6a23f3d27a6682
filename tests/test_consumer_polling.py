"""The consumer's pure parts: the per-level poll gate and the ledger of delivered offsets."""

from __future__ import annotations

import pytest

from priority_kafka import ConfigError
from priority_kafka.kafka_python.consumer._delivered import (
    AutoCommitTimer,
    Delivered,
    DeliveredOffsets,
)
from priority_kafka.kafka_python.consumer._polling import PollGate, PollRequest, PollTiming

TIMING = PollTiming(join_wait_ms=500, quiet_backoff_s=0.01, level_poll_interval_s=1.0)


def test_an_empty_level_short_of_its_share_is_polled_for_a_full_chunk():
    """Wanted records: poll now, without blocking unless asked to, for a whole chunk."""
    gate = PollGate(TIMING)
    assert gate.request(0.0, wait_ms=0, wanted=True, buffered=0, chunk=200) == PollRequest(0, 200)
    blocking = gate.request(0.0, wait_ms=40, wanted=True, buffered=0, chunk=200)
    assert blocking == PollRequest(40, 200)


def test_records_parked_for_paused_partitions_bound_what_a_poll_asks_for():
    """A buffer holding paused partitions' records is only filled up to chunk; a full one is
    not polled for more (only kept alive with one record each interval)."""
    gate = PollGate(TIMING)
    assert gate.request(0.0, wait_ms=0, wanted=True, buffered=150, chunk=200) == PollRequest(0, 50)
    gate.polled(0.0, got_records=True)
    assert gate.request(0.5, wait_ms=0, wanted=True, buffered=200, chunk=200) is None
    assert gate.request(1.0, wait_ms=0, wanted=True, buffered=200, chunk=200) == PollRequest(0, 1)


def test_a_quiet_level_is_left_alone_until_its_back_off_ends():
    """After an empty poll, no non-blocking poll within quiet_backoff_s."""
    gate = PollGate(TIMING)
    gate.polled(0.0, got_records=False)
    assert gate.request(0.005, wait_ms=0, wanted=True, buffered=0, chunk=200) is None
    assert gate.request(0.02, wait_ms=0, wanted=True, buffered=0, chunk=200) is not None


def test_a_level_that_needs_nothing_is_still_polled_each_interval_for_little():
    """kafka-python rebalances only inside poll(): keep-alive polls top the buffer up."""
    gate = PollGate(TIMING)
    gate.polled(0.0, got_records=True)
    assert gate.request(0.5, wait_ms=0, wanted=False, buffered=150, chunk=200) is None
    topping_up = gate.request(1.0, wait_ms=0, wanted=False, buffered=150, chunk=200)
    assert topping_up == PollRequest(0, 50)
    assert gate.request(1.0, wait_ms=0, wanted=False, buffered=500, chunk=200) == PollRequest(0, 1)


def test_a_joining_level_blocks_for_the_join_wait():
    """From a revoke until a non-empty assignment, and a grace time after an empty one."""
    gate = PollGate(TIMING)
    gate.revoked()
    assert gate.request(0.0, wait_ms=0, wanted=False, buffered=0, chunk=1).timeout_ms == 500
    gate.assigned(10.0, empty=True)
    assert gate.request(12.0, wait_ms=0, wanted=False, buffered=0, chunk=1).timeout_ms == 500
    assert gate.request(15.5, wait_ms=0, wanted=False, buffered=0, chunk=1).timeout_ms == 0
    gate.revoked()
    gate.assigned(20.0, empty=False)
    gate.polled(20.0, got_records=True)
    assert gate.request(20.1, wait_ms=0, wanted=False, buffered=0, chunk=1) is None


def test_poll_timing_validates_its_numbers():
    """Negative or non-numeric timings are refused with the field's name."""
    with pytest.raises(ConfigError, match="'idle_wake_ms' must be a number >= 0"):
        PollTiming(join_wait_ms=500, idle_wake_ms=-1)
    with pytest.raises(ConfigError, match="'prefetch_polls' must be at least 1"):
        PollTiming(join_wait_ms=500, prefetch_polls=0)


def test_delivered_offsets_commit_after_the_last_returned_or_the_sought_offset():
    """mark() commits offset + 1 with the leader epoch; sought() the offset itself."""
    ledger: DeliveredOffsets[str] = DeliveredOffsets()
    ledger.mark("a", 41, leader_epoch=3)
    ledger.sought("b", 7)
    assert ledger.of({"a", "b", "c"}) == {"a": Delivered(42, 3), "b": Delivered(7, -1)}
    ledger.forget(["a"])
    ledger.keep({"c"})
    assert ledger.of({"a", "b", "c"}) == {}


def test_auto_commit_timer_is_due_each_interval():
    """due() turns true interval_s after the last reset."""
    timer = AutoCommitTimer(5.0)
    timer.reset(100.0)
    assert not timer.due(104.9)
    assert timer.due(105.0)


def test_the_idle_wait_backs_off_and_flowing_records_shorten_it():
    """100 ms, doubling per empty round up to 400 ms; 5 ms right after records."""
    timing = PollTiming(join_wait_ms=500)
    assert [timing.wake_ms(flowing=False, idle_rounds=n) for n in range(5)] == [
        100,
        200,
        400,
        400,
        400,
    ]
    assert timing.wake_ms(flowing=True, idle_rounds=9) == 5


def test_watchdog_fires_once_per_limit_while_membership_stands_still() -> None:
    """An unsettled membership unchanged for the limit is a stall; any progress resets it."""
    from priority_kafka.kafka_python.consumer._polling import RebalanceWatchdog

    dog = RebalanceWatchdog.for_session(6000)
    assert dog.limit_s == 10.0 and RebalanceWatchdog.for_session(45_000).limit_s == 45.0
    joining = ("<rebalancing>", 3, "m")
    assert not dog.stalled(0.0, False, joining)
    assert not dog.stalled(9.9, False, joining)
    assert dog.stalled(10.0, False, joining) and dog.stalls == 1
    assert not dog.stalled(15.0, False, joining)  # once per limit
    assert not dog.stalled(19.0, False, ("<rebalancing>", 4, "m"))  # a new generation
    assert not dog.stalled(28.0, False, ("<rebalancing>", 4, "m"))
    assert not dog.stalled(40.0, True, ("<stable>", 4, "m"))  # settled: never a stall
    assert not dog.stalled(60.0, True, ("<stable>", 4, "m"))
    assert dog.stalls == 1


def test_a_chase_waits_only_after_a_gap_and_for_a_tenth_of_it_at_most():
    """A poll chases a flowing level's fetch only when the caller was away 10 ms or more, and
    waits at most a tenth of that time, 5 ms at most."""
    timing = PollTiming(join_wait_ms=500)
    assert timing.chase_ms(9.9) == 0.0
    assert timing.chase_ms(10.0) == 1.0
    assert timing.chase_ms(30.0) == 3.0
    assert timing.chase_ms(50.0) == 5.0
    assert timing.chase_ms(10_000.0) == 5.0
    assert PollTiming(join_wait_ms=500, chase_after_gap_ms=0).chase_ms(0.0) == 0.0
