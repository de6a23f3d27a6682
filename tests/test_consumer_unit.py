"""PriorityConsumer's own logic (quotas per poll, ordering, rewinds), on fake per-level consumers.

These complement tests/test_consumer.py, which runs every feature against the real broker.
"""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest
from kafka import TopicPartition
from kafka.errors import KafkaConnectionError
from kafka.structs import OffsetAndMetadata

from priority_kafka import ConfigError, IllegalStateError, PriorityConsumer
from priority_kafka.errors import DeserializationError
from priority_kafka.kafka_python.consumer import PollTiming
from priority_kafka.kafka_python.consumer._fetch import (
    partition_fetch_bytes,
    set_partition_fetch_bytes,
)
from tests.fakes import FakeLevelConsumer, fake_cluster_topics

TIMING = PollTiming(join_wait_ms=500)
QUIET = PollTiming(join_wait_ms=500, quiet_backoff_s=60.0)


@pytest.fixture
def fakes():
    return {}


@pytest.fixture
def make(fakes):
    def factory(level, configs):
        fakes[level] = FakeLevelConsumer(level, configs)
        return fakes[level]

    def build(backlog=None, poll_timing=TIMING, **configs):
        c = PriorityConsumer(
            "orders", max_priority=3, max_poll_records=50, group_id="app",
            consumer_factory=factory, poll_timing=poll_timing, topic_lister=fake_cluster_topics,
            **configs,
        )
        for level, count in (backlog or {}).items():
            fakes[level].backlog = count
        for fake in fakes.values():
            fake.join()
        return c

    return build


def counts(records):
    return {tp.topic: len(batch) for tp, batch in records.items()}


def offsets(records, topic):
    return [r.offset for r in records[TopicPartition(topic, 0)]]


def polls(fake):
    return [call for call in fake.calls if call[0] == "poll"]


def commits(fake):
    return [call for call in fake.calls if call[0] in ("commit", "commit_async")]


TP2 = TopicPartition("orders-2", 0)


def test_each_level_gets_its_own_group_and_the_whole_budget_as_ceiling(make, fakes):
    """Level consumers join <group>-<level> (static members as <id>-<level>) and may return up
    to max_poll_records when bursting."""
    make(client_id="svc", group_instance_id="host-1")
    for key, value in (("group_id", "app"), ("client_id", "svc"), ("group_instance_id", "host-1")):
        assert {lv: f.configs[key] for lv, f in fakes.items()} == {
            lv: f"{value}-{lv}" for lv in (2, 1, 0)
        }
    assert all(f.configs["max_poll_records"] == 50 for f in fakes.values())
    assert all(f.topic == f"orders-{lv}" for lv, f in fakes.items())


def test_reconnect_backoff_defaults_to_one_second_unless_given(make, fakes):
    """Level consumers reconnect after at most 1 s unless the user set the backoff (in either
    spelling)."""
    make()
    assert {f.configs["reconnect_backoff_max_ms"] for f in fakes.values()} == {1000}
    make(**{"reconnect.backoff.max.ms": 30000})
    assert {f.configs["reconnect_backoff_max_ms"] for f in fakes.values()} == {30000}


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({}, 3 * 1048576),  # kafka-python's 1 MiB once per level
        ({"max_partition_fetch_bytes": 65536}, 65536),  # given: as given
        ({"max.partition.fetch.bytes": 65536}, 65536),
        ({"fetch_max_bytes": 2000000}, 2000000),  # within a request's limit
    ],
)
def test_levels_fetch_as_much_per_request_as_one_consumer_of_all_levels(
    make, fakes, configs, expected
):
    """Unless given, each level's max_partition_fetch_bytes is kafka-python's default times
    the number of levels (within fetch_max_bytes)."""
    make(**configs)
    assert {f.configs["max_partition_fetch_bytes"] for f in fakes.values()} == {expected}


def test_a_levels_share_is_split_over_its_partitions_within_bounds():
    """Per partition: the level's share over its partitions, at least 64 KiB, at most the
    ceiling; a client without kafka-python's fetcher config is left alone."""
    assert partition_fetch_bytes(12 << 20, 4, 3 << 20) == 3 << 20
    assert partition_fetch_bytes(4 << 20, 4, 3 << 20) == 1 << 20
    assert partition_fetch_bytes(1 << 20, 100, 3 << 20) == 64 << 10
    assert partition_fetch_bytes(1 << 20, 0, 3 << 20) == 1 << 20  # nothing assigned yet
    assert set_partition_fetch_bytes(object(), 1000) is False


def test_connection_configs_carry_what_reaches_the_cluster(make):
    """connection_configs holds the servers and security settings, nothing consumer-specific."""
    c = make(bootstrap_servers="b:9092", security_protocol="SASL_PLAINTEXT",
             sasl_mechanism="SCRAM-SHA-512", sasl_plain_password="pw", fetch_max_bytes=1024)
    assert c.connection_configs == {
        "bootstrap_servers": "b:9092", "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_password": "pw",
    }
    assert "pw" not in repr(c)


def test_poll_serves_each_level_its_quota_highest_first(make, fakes):
    """A poll returns 29/14/7 from levels 2/1/0, in that order, each level fetching 4 x 50."""
    c = make({0: 100, 1: 100, 2: 100})
    records = c.poll()
    assert counts(records) == {"orders-2": 29, "orders-1": 14, "orders-0": 7}
    assert [tp.topic for tp in records] == ["orders-2", "orders-1", "orders-0"]
    assert [call[2] for f in (fakes[2], fakes[1], fakes[0]) for call in f.calls] == [200] * 3


def test_prefetched_records_serve_later_polls_without_fetching(make, fakes):
    """Levels whose prefetch buffer covers their quota are not polled; offsets stay in order."""
    c = make({0: 1000, 1: 1000, 2: 1000})
    served = [c.poll() for _ in range(7)]
    assert all(
        counts(r) == {"orders-2": 29, "orders-1": 14, "orders-0": 7} for r in served
    )
    # 200 fetched: level 2 (29 a poll) had 26 left for the 7th poll and fetched again.
    assert (len(polls(fakes[2])), len(polls(fakes[1])), len(polls(fakes[0]))) == (2, 1, 1)
    assert offsets(served[6], "orders-2") == list(range(174, 203))
    assert offsets(served[6], "orders-1") == list(range(84, 98))


def test_a_level_prefetches_no_more_bytes_than_its_share_of_the_fetch_buffer(make, fakes):
    """Records of 200 KB and fetch_buffer_bytes of 3 MiB (1 MiB a level): once a level knows
    the size of its records it asks kafka-python only for what fits in its share (5), where
    100 B records fill the whole prefetch (4 polls' worth)."""
    c = make({0: 1000, 1: 1000, 2: 1000}, fetch_buffer_bytes=3 << 20)
    fakes[2].values = {offset: b"x" * 200_000 for offset in range(1000)}
    for _ in range(8):  # 200 fetched, 29 served a poll: the 8th finds level 2 empty
        c.poll()
    level2, level1 = polls(fakes[2]), polls(fakes[1])
    assert [call[2] for call in level2] == [200, 5]  # 1 MiB of 200 KB records: 5
    assert [call[2] for call in level1] == [200]  # 100 B records: 4 polls' worth, as before


def test_max_records_caps_the_total_serving_high_levels_first(make, fakes):
    """poll(max_records=30) returns 29 from level 2, 1 from level 1, and skips level 0."""
    c = make({0: 100, 1: 100, 2: 100})
    assert counts(c.poll(max_records=30)) == {"orders-2": 29, "orders-1": 1}
    assert counts(c.poll(max_records=30)) == {"orders-2": 29, "orders-1": 1}


def test_a_level_left_nothing_is_still_polled_now_and_then(make, fakes):
    """kafka-python rebalances only inside poll(): a level the total leaves nothing is polled
    once per interval, for at most what fills its buffer to max_poll_records."""
    c = make({0: 1000, 1: 100, 2: 1000})
    c.poll(max_records=29)
    c.poll(max_records=29)
    assert [call[2] for call in polls(fakes[0])] == [200]  # once, within the interval
    always = PollTiming(join_wait_ms=500, level_poll_interval_s=0)
    c = make({0: 1000, 1: 100, 2: 1000}, poll_timing=always)
    for _ in range(3):
        assert counts(c.poll(max_records=29)) == {"orders-2": 29}
    assert [call[2] for call in polls(fakes[0])] == [200, 1, 1]  # then its buffer is full


def test_burst_never_makes_a_poll_exceed_max_poll_records(make, fakes):
    """When level 0 bursts and the others wake up, the total stays at max_poll_records."""
    c = make({0: 10_000}, poll_timing=PollTiming(join_wait_ms=500, quiet_backoff_s=0))
    for _ in range(4):
        assert counts(c.poll()) == {"orders-0": 7}
    assert counts(c.poll()) == {"orders-0": 50}
    fakes[2].backlog, fakes[1].backlog = 1000, 1000
    # The lenders have records again: the borrower gives way, everyone gets their share.
    assert counts(c.poll()) == {"orders-2": 29, "orders-1": 14, "orders-0": 7}


def test_a_failing_level_puts_back_the_levels_already_read(make, fakes):
    """If level 1 raises, level 2's records of that poll come again, first, in the next poll."""
    c = make({0: 100, 1: 100, 2: 100})
    fakes[1].fail_next_poll = RuntimeError("broker said no")
    with pytest.raises(RuntimeError, match="broker said no"):
        c.poll()
    assert offsets(c.poll(), "orders-2") == list(range(29))


def test_a_lost_connection_raised_by_poll_is_an_empty_poll(make, fakes, caplog):
    """kafka-python's poll() raises KafkaConnectionError when a broker's connection drops while
    it looks for the group coordinator (POLL_RAISES_LOST_CONNECTION; a chaos-soak member died of
    it): that level returns nothing this time, with a warning, and the next poll reads on."""
    c = make({0: 100, 1: 100, 2: 100})
    fakes[2].fail_next_poll = KafkaConnectionError("socket disconnected")
    with caplog.at_level(logging.WARNING, logger="priority_kafka.kafka_python._kafka"):
        first = c.poll()
    assert "orders-2" not in counts(first) and counts(first)["orders-1"] > 0
    assert "poll() lost a broker connection (KafkaConnectionError: socket disconnected)" in (
        caplog.text)
    later = [c.poll() for _ in range(3)]
    assert [r.offset for records in later for r in records.get(TP2, [])][:29] == list(range(29))


def test_polls_pause_the_collector_except_while_a_level_poll_may_block(make, fakes):
    """Decoding and buffering run with the cyclic garbage collector paused; a level poll that
    may block runs with it; poll() and iteration leave it enabled, also when a level fails."""
    c = make({1: 100, 2: 100})
    seen = []
    for fake in fakes.values():
        def watched(timeout_ms=0, max_records=None, update_offsets=True, _poll=fake.poll):
            seen.append((timeout_ms > 0, gc.isenabled()))
            return _poll(timeout_ms, max_records, update_offsets)

        fake.poll = watched
    fakes[1].fail_next_poll = RuntimeError("broker said no")
    with pytest.raises(RuntimeError):
        c.poll()
    assert gc.isenabled()
    assert c.poll()
    assert gc.isenabled()
    assert next(c).topic == "orders-2"
    assert gc.isenabled()
    while c.poll():
        pass
    assert c.poll(timeout_ms=20) == {}
    assert gc.isenabled()
    assert {(False, False), (True, True)} == set(seen)


def test_a_failing_first_record_raises_a_deserialization_error_naming_it(make, fakes):
    """Nothing before the failure: poll() raises DeserializationError (also a ValueError)
    with the record's place and raw bytes; the next poll returns the same records."""
    failures = [ValueError("cannot read b'v'")]

    def deserialize(value):
        if failures:
            raise failures.pop()
        return value.decode()

    c = make({1: 5, 2: 5}, value_deserializer=deserialize)
    with pytest.raises(DeserializationError, match=r"orders-2\[0\]@0: ValueError") as info:
        c.poll()
    error = info.value
    assert isinstance(error, ValueError)
    assert (error.topic, error.partition, error.offset, error.value) == ("orders-2", 0, 0, b"v")
    assert isinstance(error.__cause__, ValueError)
    records = c.poll()
    assert offsets(records, "orders-2") == list(range(5))
    assert offsets(records, "orders-1") == list(range(5))
    assert records[TP2][0].value == "v"


def test_a_failure_further_in_returns_the_records_before_it_then_raises(make, fakes):
    """Records before the bad one are returned; the next poll raises at it; seeking past it
    skips exactly that record, and commits never pass it before that."""

    def deserialize(value):
        if value == b"bad":
            raise ValueError("bad")
        return value

    eager = PollTiming(join_wait_ms=500, quiet_backoff_s=0)
    c = make({2: 5}, value_deserializer=deserialize, poll_timing=eager)
    fakes[2].values = {2: b"bad"}
    assert offsets(c.poll(), "orders-2") == [0, 1]
    with pytest.raises(DeserializationError) as info:
        c.poll()
    c.commit()
    assert commits(fakes[2])[-1] == ("commit", {TP2: OffsetAndMetadata(2, "", -1)})
    c.seek(TP2, info.value.offset + 1)
    assert offsets(c.poll(), "orders-2") == [3, 4]


def test_commit_covers_returned_records_not_prefetched_ones(make, fakes):
    """commit() without offsets commits the offset after the last record poll() returned."""
    c = make({2: 100})
    c.poll()
    assert fakes[2].position == 100  # fetched ahead (the whole backlog)
    c.commit()
    assert commits(fakes[2]) == [("commit", {TP2: OffsetAndMetadata(29, "", -1)})]
    assert c.position(TP2) == 29


def test_iteration_then_commit_covers_the_yielded_records(make, fakes):
    """Records fetched for iteration but not yet yielded are not committed."""
    c = make({2: 100})
    first = next(iter(c))
    assert (first.topic, first.offset) == ("orders-2", 0)
    c.commit()
    assert commits(fakes[2]) == [("commit", {TP2: OffsetAndMetadata(1, "", -1)})]
    assert offsets(c.poll(), "orders-2") == list(range(1, 30))


def test_auto_commit_commits_what_the_previous_poll_returned(make, fakes):
    """With auto-commit due, a poll first commits (async) what the polls before it returned."""
    c = make({2: 100}, auto_commit_interval_ms=0)
    c.poll()
    assert commits(fakes[2]) == []
    c.poll()
    assert commits(fakes[2]) == [("commit_async", {TP2: OffsetAndMetadata(29, "", -1)})]
    assert fakes[2].configs["enable_auto_commit"] is False


def test_close_commits_returned_records_only_with_auto_commit(make, fakes):
    """close() commits what was returned when auto-commit is on, nothing when it is off."""
    c = make({2: 100})
    c.poll()
    c.close()
    assert commits(fakes[2]) == [("commit", {TP2: OffsetAndMetadata(29, "", -1)})]
    c = make({2: 100}, enable_auto_commit=False)
    c.poll()
    c.close()
    assert commits(fakes[2]) == []


def test_a_revoked_partition_commits_returned_and_rewinds_prefetched(make, fakes):
    """On revoke: commit what was returned, drop the prefetched rest and seek back to it."""
    c = make({2: 100})
    c.poll()
    asyncio.run(fakes[2].listener.on_partitions_revoked({TP2}))
    assert commits(fakes[2]) == [("commit_async", {TP2: OffsetAndMetadata(29, "", -1)})]
    assert ("seek", TP2, 29) in fakes[2].calls  # the prefetched rest was dropped
    assert offsets(c.poll(), "orders-2") == list(range(29, 58))


def test_level_figures_are_an_immutable_snapshot_published_by_each_poll(make, fakes):
    """The figures other threads read are replaced whole by each poll, never changed in place,
    and metrics() is built from them."""
    c = make({2: 100, 0: 3})
    before = c.level_figures
    assert before[2].records_returned == 0 and before[2].reserved_quota == 29
    c.pause(TP2)
    c.poll()
    after = c.level_figures
    assert before[2].records_returned == 0  # the old snapshot is untouched
    assert list(after) == [2, 1, 0]
    assert after[2].paused_partitions == 1 and after[0].records_returned == 3
    assert after[2].window[-1] == 0 and after[0].last_quota >= 7
    with pytest.raises(AttributeError):
        after[0].records_returned = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        after[0] = after[2]  # type: ignore[index]
    metrics = c.metrics()
    assert metrics[0]["records_returned"] == 3 and metrics[2]["paused_partitions"] == 1


def test_paused_partitions_keep_their_prefetched_records_until_resumed(make, fakes):
    """A paused partition returns nothing; after resume its prefetched records come first."""
    c = make({2: 100})
    c.poll()
    c.pause(TP2)
    assert c.poll() == {}
    c.resume(TP2)
    after = offsets(c.poll(), "orders-2")
    assert after[:21] == list(range(29, 50))  # the 21 prefetched, then maybe fresh ones
    assert after == list(range(29, 29 + len(after)))


def test_a_level_that_had_nothing_is_not_polled_again_at_once(make, fakes):
    """While level 2 flows, empty levels 1 and 0 are polled once, then left alone a while."""
    c = make({2: 1000}, poll_timing=QUIET)
    for _ in range(3):
        assert counts(c.poll()) == {"orders-2": 29}
    assert (len(polls(fakes[1])), len(polls(fakes[0]))) == (1, 1)


def test_a_waiting_poll_always_waits_on_the_highest_level(make, fakes):
    """With nothing anywhere, every poll(timeout_ms > 0) blocks on level 2, quiet or not."""
    c = make(poll_timing=QUIET)
    for _ in range(2):
        assert c.poll(timeout_ms=20) == {}
    assert len([call for call in polls(fakes[2]) if call[1] > 0]) >= 2


def test_seek_drops_prefetched_records(make, fakes):
    """After seek(), the next poll reads from the offset sought to."""
    c = make({2: 100})
    c.poll()
    c.seek(TP2, 3)
    assert offsets(c.poll(), "orders-2") == list(range(3, 32))


def test_a_joining_level_gets_time_to_finish_its_join(make, fakes):
    """While a level (re)joins its group, its poll blocks long enough for kafka-python to join."""
    c = make({2: 100})
    fakes[0].rebalance()
    c.poll()
    assert polls(fakes[0])[0][1] == TIMING.join_wait_ms
    assert polls(fakes[2])[0][1] == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout_ms": -1}, "'timeout_ms' must be a number >= 0 \\(got -1\\)"),
        ({"timeout_ms": float("nan")}, "'timeout_ms' must be a finite number or inf \\(got nan\\)"),
        ({"max_records": 0}, "'max_records' must be at least 1 \\(got 0\\)"),
        ({"max_records": True}, "'max_records' must be an int \\(got True\\)"),
    ],
)
def test_poll_rejects_bad_arguments(make, kwargs, message):
    """poll() names the bad argument and value."""
    with pytest.raises(ValueError, match=message):
        make().poll(**kwargs)


def test_partition_calls_reject_partitions_of_unknown_levels(make):
    """A partition of a level outside [0, max_priority) is refused with the topic named."""
    c = make()
    with pytest.raises(ConfigError, match="'orders-7' has priority 7, outside \\[0, 3\\)"):
        c.pause(TopicPartition("orders-7", 0))
    with pytest.raises(TypeError, match="TopicPartition"):
        c.seek(("orders-1", 0), 5)


def test_subscribe_takes_topics_or_a_pattern(make):
    """subscribe() with both or neither of topics and pattern fails clearly."""
    c = make()
    with pytest.raises(ConfigError, match="either topics or a pattern"):
        c.subscribe(["a"], pattern="b.*")
    with pytest.raises(ConfigError, match="either topics or a pattern"):
        c.subscribe()
    with pytest.raises(ConfigError, match="listener"):
        c.subscribe(["a"], listener=object())


def test_close_closes_every_level_and_refuses_further_use(make, fakes):
    """close() reaches every level consumer; later calls raise IllegalStateError."""
    c = make()
    c.close()
    assert all(f.closed for f in fakes.values())
    with pytest.raises(IllegalStateError, match="closed"):
        c.assignment()


def test_a_failing_level_constructor_closes_the_levels_already_built(fakes):
    """If building level 1's consumer fails, level 2's consumer is closed, not leaked."""

    def factory(level, configs):
        if level == 1:
            raise RuntimeError("no broker")
        fakes[level] = FakeLevelConsumer(level, configs)
        return fakes[level]

    with pytest.raises(RuntimeError, match="no broker"):
        PriorityConsumer(max_priority=3, consumer_factory=factory)
    assert fakes[2].closed


def test_rebalance_events_reach_the_user_listener_as_the_same_event(make, fakes):
    """revoked, assigned and lost reach the user's listener as such; lost means rejoining."""
    from kafka import ConsumerRebalanceListener

    events = []

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            events.append(("revoked", revoked))

        def on_partitions_assigned(self, assigned):
            events.append(("assigned", assigned))

        def on_partitions_lost(self, lost):
            events.append(("lost", lost))

    c = make()
    c.subscribe(["orders"], listener=Listener())
    hook = fakes[1].listener
    tp = {TopicPartition("orders-1", 0)}
    asyncio.run(hook.on_partitions_assigned(tp))
    c.poll()
    assert polls(fakes[1])[-1][1] == 0  # joined: no join wait
    asyncio.run(hook.on_partitions_lost(tp))
    c.poll()
    assert polls(fakes[1])[-1][1] == TIMING.join_wait_ms  # lost means rejoining
    asyncio.run(hook.on_partitions_revoked(tp))
    assert events == [("assigned", tp), ("lost", tp), ("revoked", tp)]


def test_an_infinite_timeout_waits_in_bounded_slices(fakes):
    """poll(timeout_ms=inf) on a single active level blocks in finite slices (no overflow)."""

    def factory(level, configs):
        fakes[level] = FakeLevelConsumer(level, configs)
        return fakes[level]

    c = PriorityConsumer(max_priority=3, consumer_factory=factory, poll_timing=TIMING)
    c.assign([TP2])
    original = fakes[2].poll

    def poll_then_data(timeout_ms=0, max_records=None, update_offsets=True):
        fakes[2].backlog = 3  # data arrives while the first slice waits
        return original(timeout_ms, max_records)

    fakes[2].poll = poll_then_data
    assert offsets(c.poll(timeout_ms=float("inf")), "orders-2") == [0, 1, 2]
    assert all(call[1] <= 60_000 for call in polls(fakes[2]))


def test_a_bad_consumer_timeout_names_the_setting(make):
    """consumer_timeout_ms that is not a number is a ConfigError naming it."""
    with pytest.raises(ConfigError, match="'consumer_timeout_ms' must be a number"):
        make(consumer_timeout_ms="soon")
