"""PriorityConsumer's own logic (quotas per poll, ordering, rewinds), on fake per-level consumers.

These complement tests/test_consumer.py, which runs every feature against the real broker.
"""

from __future__ import annotations

import pytest
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from priority_kafka import ConfigError, IllegalStateError, PriorityConsumer


def record(topic, offset, value=b"v"):
    return ConsumerRecord(topic, 0, -1, offset, 0, 0, None, value, [], None, -1, len(value), -1)


class FakeLevelConsumer:
    """Stands in for one level's KafkaConsumer: serves a backlog, logs every call."""

    def __init__(self, level, configs):
        self.level = level
        self.configs = configs
        self.topic = None
        self.position = 0
        self.backlog = 0
        self.calls = []
        self.fail_next_poll = None
        self.assigned = set()
        self.closed = False

    def subscribe(self, topics=(), pattern=None, listener=None):
        self.topic = topics[0]
        self.assigned = {TopicPartition(self.topic, 0)}
        self.listener = listener

    def subscription(self):
        return {self.topic}

    def assignment(self):
        return set(self.assigned)

    def poll(self, timeout_ms=0, max_records=None, update_offsets=True):
        self.calls.append(("poll", timeout_ms, max_records))
        if self.fail_next_poll is not None:
            error, self.fail_next_poll = self.fail_next_poll, None
            raise error
        count = min(max_records, self.backlog - self.position)
        if count <= 0:
            return {}
        batch = [record(self.topic, self.position + i) for i in range(count)]
        self.position += count
        return {TopicPartition(self.topic, 0): batch}

    def commit(self, offsets=None, timeout_ms=None):
        self.calls.append(("commit", offsets))

    def seek(self, tp, offset):
        self.calls.append(("seek", tp, offset))
        self.position = offset

    def close(self, autocommit=True, timeout_ms=None):
        self.closed = True


@pytest.fixture
def fakes():
    return {}


@pytest.fixture
def make(fakes):
    def factory(level, configs):
        fakes[level] = FakeLevelConsumer(level, configs)
        return fakes[level]

    def build(backlog=None, **configs):
        c = PriorityConsumer(
            "orders", max_priority=3, max_poll_records=50, group_id="app",
            consumer_factory=factory, **configs,
        )
        for level, count in (backlog or {}).items():
            fakes[level].backlog = count
        c._joined = dict.fromkeys(c._joined, True)  # the fakes have no group to join
        return c

    return build


def counts(records):
    return {tp.topic: len(batch) for tp, batch in records.items()}


def test_each_level_gets_its_own_group_and_the_whole_budget_as_ceiling(make, fakes):
    """Level consumers join <group>-<level> and may return up to max_poll_records when bursting."""
    make()
    groups = {lv: f.configs["group_id"] for lv, f in fakes.items()}
    assert groups == {2: "app-2", 1: "app-1", 0: "app-0"}
    assert all(f.configs["max_poll_records"] == 50 for f in fakes.values())
    assert all(f.topic == f"orders-{lv}" for lv, f in fakes.items())


def test_poll_asks_each_level_for_its_quota_highest_first(make, fakes):
    """A poll requests 29/14/7 from levels 2/1/0, in that order, and returns them in that order."""
    c = make({0: 100, 1: 100, 2: 100})
    records = c.poll()
    assert counts(records) == {"orders-2": 29, "orders-1": 14, "orders-0": 7}
    assert [tp.topic for tp in records] == ["orders-2", "orders-1", "orders-0"]
    assert [call[2] for f in (fakes[2], fakes[1], fakes[0]) for call in f.calls] == [29, 14, 7]


def test_max_records_caps_the_total_serving_high_levels_first(make, fakes):
    """poll(max_records=30) returns 29 from level 2, 1 from level 1, and skips level 0."""
    c = make({0: 100, 1: 100, 2: 100})
    assert counts(c.poll(max_records=30)) == {"orders-2": 29, "orders-1": 1}
    assert fakes[0].calls == []


def test_burst_never_makes_a_poll_exceed_max_poll_records(make, fakes):
    """When level 0 bursts and the others wake up, the total stays at max_poll_records."""
    c = make({0: 10_000})
    for _ in range(4):
        assert counts(c.poll()) == {"orders-0": 7}
    assert counts(c.poll()) == {"orders-0": 50}
    fakes[2].backlog, fakes[1].backlog = 1000, 1000
    assert sum(counts(c.poll()).values()) == 50


def test_a_failing_level_rewinds_the_levels_already_read(make, fakes):
    """If level 1 raises, level 2's records of that poll are sought back, and the error surfaces."""
    c = make({0: 100, 1: 100, 2: 100})
    fakes[1].fail_next_poll = RuntimeError("broker said no")
    with pytest.raises(RuntimeError, match="broker said no"):
        c.poll()
    assert ("seek", TopicPartition("orders-2", 0), 0) in fakes[2].calls
    assert counts(c.poll())["orders-2"] == 29
    assert fakes[2].position == 29


def test_a_failing_deserializer_rewinds_the_whole_poll(make, fakes):
    """A deserializer error seeks every partition of the poll back to its first record."""
    def deserialize(value):
        raise ValueError(f"cannot read {value!r}")

    c = make({1: 5, 2: 5}, value_deserializer=deserialize)
    with pytest.raises(ValueError, match="cannot read"):
        c.poll()
    assert fakes[2].position == 0 and fakes[1].position == 0


def test_iteration_then_commit_puts_unyielded_records_back(make, fakes):
    """Records fetched for iteration but not yet yielded are sought back before commit()."""
    c = make({2: 100})
    first = next(iter(c))
    assert (first.topic, first.offset) == ("orders-2", 0)
    c.commit()
    assert fakes[2].calls[-2:] == [("seek", TopicPartition("orders-2", 0), 1), ("commit", None)]


def test_a_joining_level_gets_time_to_finish_its_join(make, fakes):
    """While a level (re)joins its group, its poll blocks long enough for kafka-python to join."""
    c = make({2: 100})
    c._joined[0] = False
    c.poll()
    assert fakes[0].calls[0][1] >= 300
    assert fakes[2].calls[0][1] == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout_ms": -1}, "'timeout_ms' must be a number >= 0 \\(got -1\\)"),
        ({"max_records": 0}, "'max_records' must be an integer >= 1 \\(got 0\\)"),
        ({"max_records": True}, "'max_records' must be an integer >= 1 \\(got True\\)"),
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
    import asyncio

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
    assert c._joined[1]
    asyncio.run(hook.on_partitions_lost(tp))
    assert not c._joined[1]
    asyncio.run(hook.on_partitions_revoked(tp))
    assert events == [("assigned", tp), ("lost", tp), ("revoked", tp)]
