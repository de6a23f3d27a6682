"""PriorityConsumer against the real local Apache Kafka broker."""

from __future__ import annotations

import threading
import time
from collections import Counter

import kafka.errors
import pytest
from kafka import ConsumerRebalanceListener, TopicPartition
from kafka.admin import KafkaAdminClient, NewPartitions

from priority_kafka import (
    ConfigError,
    DeserializationError,
    IllegalStateError,
    PriorityConsumer,
    PriorityProducer,
    create_priority_topics,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def topic(bootstrap_servers, unique_name):
    """A fresh logical topic with three priority topics of one partition each."""
    name = unique_name("orders")
    create_priority_topics(bootstrap_servers, name, 3)
    return name


def produce(bootstrap_servers, topic, counts, size=100, key_count=0):
    """Send counts[level] records to each level; values are b'<level>:<i>' padded to size."""
    with PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=3, linger_ms=5) as p:
        for level, count in counts.items():
            for i in range(count):
                key = str(i % key_count).encode() if key_count else None
                p.send(topic, f"{level}:{i}:".encode().ljust(size, b"x"), key=key, priority=level)
        p.flush()


def consumer(bootstrap_servers, topic, group, **configs):
    settings = {
        "bootstrap_servers": bootstrap_servers,
        "group_id": group,
        "max_priority": 3,
        "auto_offset_reset": "earliest",
        **configs,
    }
    return PriorityConsumer(topic, **settings)


def level_counts(records):
    counts = Counter()
    for tp, batch in records.items():
        counts[int(tp.topic.rsplit("-", 1)[1])] += len(batch)
    return counts


def poll_until(c, predicate, timeout_s=30.0):
    """Poll until predicate(records) holds for one poll's result; return that result."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        records = c.poll(timeout_ms=500)
        if predicate(records):
            return records
    raise AssertionError("condition not reached before the deadline")


def test_steady_state_split_is_29_14_7(bootstrap_servers, topic, unique_name):
    """With backlog on all three levels and 50 records per poll, polls return 29/14/7."""
    produce(bootstrap_servers, topic, {0: 1500, 1: 1500, 2: 1500})
    with consumer(bootstrap_servers, topic, unique_name("g"), max_poll_records=50) as c:
        poll_until(c, lambda r: len(level_counts(r)) == 3)
        splits = [level_counts(c.poll(timeout_ms=1000)) for _ in range(20)]
    assert all(sum(s.values()) <= 50 for s in splits)
    steady = [s for s in splits if s == {2: 29, 1: 14, 0: 7}]
    assert len(steady) >= 18, splits


def test_idle_levels_lend_capacity_to_the_busy_one(bootstrap_servers, topic, unique_name):
    """With only level 0 loaded, the poll after four maxed-out polls returns 50 level-0 records."""
    produce(bootstrap_servers, topic, {0: 3000})
    with consumer(bootstrap_servers, topic, unique_name("g"), max_poll_records=50) as c:
        maxed = 0
        deadline = time.monotonic() + 30
        while maxed < 4 and time.monotonic() < deadline:
            counts = level_counts(c.poll(timeout_ms=500))
            assert counts[0] <= 7 or maxed >= 4, counts  # no burst before four maxed-out polls
            maxed += counts[0] >= 7
        assert maxed == 4
        assert level_counts(c.poll(timeout_ms=1000)) == {0: 50}
        assert c.metrics()[0]["burst_count"] >= 1
        assert c.metrics()[0]["last_quota"] == 50


def test_poll_returns_highest_priority_first(bootstrap_servers, topic, unique_name):
    """The dict poll() returns is ordered from the highest level to the lowest."""
    produce(bootstrap_servers, topic, {0: 200, 1: 200, 2: 200})
    with consumer(bootstrap_servers, topic, unique_name("g"), max_poll_records=50) as c:
        records = poll_until(c, lambda r: len(level_counts(r)) == 3)
        levels = [int(tp.topic.rsplit("-", 1)[1]) for tp in records]
        assert levels == sorted(levels, reverse=True)


def kafka_style_application(c, expected, listener_log):
    """Code written for kafka-python's KafkaConsumer: nothing in it knows about priorities."""
    seen = []
    # 1. A poll/commit loop.
    deadline = time.monotonic() + 60
    while (len(seen) < expected // 2 or len(c.assignment()) < 3) and time.monotonic() < deadline:
        for tp, batch in c.poll(timeout_ms=500, max_records=100).items():
            seen.extend((tp.topic, r.partition, r.offset) for r in batch)
        c.commit()
    # 2. pause everything, poll (nothing arrives), resume.
    assigned = c.assignment()
    c.pause(*assigned)
    assert c.paused() == assigned
    assert not c.poll(timeout_ms=300)
    c.resume(*assigned)
    # 3. seek one partition back by one record and read it again.
    tp = sorted(assigned)[0]
    position = c.position(tp)
    if position > 0:
        c.seek(tp, position - 1)
        again = poll_until(c, lambda r: tp in r)
        assert again[tp][0].offset == position - 1
        seen.extend((tp.topic, r.partition, r.offset) for r in again[tp][1:])
        others = (r for t, b in again.items() if t != tp for r in b)
        seen.extend((r.topic, r.partition, r.offset) for r in others)
    # 4. the iterator, which stops after consumer_timeout_ms without records.
    for record in c:
        seen.append((record.topic, record.partition, record.offset))
    c.commit()
    assert listener_log, "the rebalance listener was never called"
    return seen


class RecordingListener(ConsumerRebalanceListener):
    def __init__(self):
        self.log = []

    def on_partitions_revoked(self, revoked):
        self.log.append(("revoked", sorted(revoked)))

    def on_partitions_assigned(self, assigned):
        self.log.append(("assigned", sorted(assigned)))


def test_code_written_for_kafka_consumer_runs_unchanged(bootstrap_servers, topic, unique_name):
    """Application code written for KafkaConsumer reads every record once on PriorityConsumer.

    (On kafka-python 3.0.12's own KafkaConsumer the same code can stall after resume(): records
    fetched while paused are parked and not returned again; PriorityConsumer releases them.)
    """
    produce(bootstrap_servers, topic, {0: 300, 1: 300, 2: 300})
    listener = RecordingListener()
    c = PriorityConsumer(
        bootstrap_servers=bootstrap_servers, group_id=unique_name("g"), max_priority=3,
        auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=6000,
        # Topics created a moment ago may miss from the first metadata: refresh quickly.
        metadata_max_age_ms=2000,
    )
    c.subscribe([topic], listener=listener)
    with c:
        seen = kafka_style_application(c, 900, listener.log)
    assert len(seen) == 900
    assert len(set(seen)) == 900
    assert any(event == "assigned" and parts for event, parts in listener.log)


def test_restart_resumes_from_committed_offsets(bootstrap_servers, topic, unique_name):
    """A new consumer in the same group continues after the last commit: none lost or repeated."""
    produce(bootstrap_servers, topic, {0: 100, 1: 100, 2: 100})
    group = unique_name("g")
    first = []
    with consumer(bootstrap_servers, topic, group, enable_auto_commit=False) as c:
        while len(first) < 120:
            for batch in c.poll(timeout_ms=500, max_records=40).values():
                first.extend((r.topic, r.offset) for r in batch)
        c.commit()
    rest = []
    with consumer(bootstrap_servers, topic, group, consumer_timeout_ms=3000) as c:
        rest.extend((r.topic, r.offset) for r in c)
    assert len(first) + len(rest) == 300
    assert not set(first) & set(rest)


# kafka-python 3.0.12 sometimes leaves a member of a group that rejoins (after an empty first
# assignment of a topic created a moment before, or after partitions were added) unsynced until
# the broker expires its session (45 s by default): a short session bounds that stall.
QUICK_SESSIONS = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 1_000}


def consume_together(results, total, poll_once, until=None):
    """Call ``poll_once(member)`` on a thread per member until ``results`` hold ``total`` (and
    ``until()`` holds, when given).

    No idle timeout: a rebalance may pause one member for seconds (the other notices it only
    at its next heartbeat). Records are kept as (topic, partition, offset) per member.
    """
    deadline = time.monotonic() + 120

    def done():
        return sum(map(len, results.values())) >= total and (until is None or until())

    def run(index):
        while not done() and time.monotonic() < deadline:
            for batch in poll_once(index).values():
                results[index].extend((r.topic, r.partition, r.offset) for r in batch)

    threads = [threading.Thread(target=run, args=(index,)) for index in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)


def returned_offsets(records, into):
    """Record, per partition, the offset after the last record returned."""
    for tp, batch in records.items():
        into[tp] = batch[-1].offset + 1


def wait_committed(c, expected, timeout_s=30.0):
    """Wait until committed() equals ``expected`` for every partition (async commits land)."""
    deadline = time.monotonic() + timeout_s
    while {tp: c.committed(tp) for tp in expected} != expected:
        if time.monotonic() > deadline:
            found = {tp: c.committed(tp) for tp in expected}
            raise AssertionError(f"committed {found}, expected {expected}")
        time.sleep(0.1)


def test_auto_commit_covers_returned_records_never_prefetched_ones(
    bootstrap_servers, topic, unique_name
):
    """Auto-commit commits what earlier polls returned, though each level fetched far ahead;
    a consumer that then dies (no commit on close) is followed without loss or repeats."""
    produce(bootstrap_servers, topic, {0: 300, 1: 300, 2: 300})
    group = unique_name("g")
    returned: dict[TopicPartition, int] = {}
    first: list = []
    c = consumer(bootstrap_servers, topic, group, auto_commit_interval_ms=0)
    try:
        while len(first) < 150:
            records = c.poll(timeout_ms=500, max_records=30)
            returned_offsets(records, returned)
            first.extend((r.topic, r.offset) for batch in records.values() for r in batch)
        before_last = dict(returned)
        assert sum(m["records_prefetched"] for m in c.metrics().values()) > 0
        last = c.poll(timeout_ms=500, max_records=30)  # auto-commits what came before it
        unhandled = {(r.topic, r.offset) for batch in last.values() for r in batch}
        assert unhandled
        first.extend(unhandled)
        wait_committed(c, before_last)
    finally:
        c.close(autocommit=False)  # dies: what the last poll returned is not committed
    rest: list = []
    with consumer(bootstrap_servers, topic, group, consumer_timeout_ms=3000) as c:
        rest.extend((r.topic, r.offset) for r in c)
    assert len(set(first) | set(rest)) == 900
    assert set(first) & set(rest) == unhandled  # at least once: only those come again


def test_a_member_joining_later_continues_where_the_first_left_off(
    bootstrap_servers, unique_name
):
    """When a second member joins, the first commits what it returned as its partitions are
    revoked (never its prefetched records): together they read every record exactly once."""
    name = unique_name("orders")
    create_priority_topics(bootstrap_servers, name, 3, num_partitions=2)
    produce(bootstrap_servers, name, {0: 400, 1: 400, 2: 400}, key_count=50)
    group = unique_name("g")
    # Only the pre-rebalance commit and close() commit: the interval never comes round.
    settings = {"auto_commit_interval_ms": 600_000, **QUICK_SESSIONS}
    results: dict[int, list] = {0: [], 1: []}
    members = [consumer(bootstrap_servers, name, group, **settings)]
    while len(results[0]) < 150:
        for batch in members[0].poll(timeout_ms=500, max_records=20).values():
            results[0].extend((r.topic, r.partition, r.offset) for r in batch)
    members.append(consumer(bootstrap_servers, name, group, **settings))

    def poll_once(index):
        # The first goes slowly until the second has its share of every level (the first
        # notices the rebalance only at its next heartbeat, within 1 s here).
        slow = index == 0 and len(members[1].assignment()) < 3
        if slow:
            time.sleep(0.05)
        return members[index].poll(timeout_ms=500, max_records=2 if slow else 20)

    consume_together(results, 1200, poll_once)
    for c in members:
        c.close()
    everything = results[0] + results[1]
    assert results[1], "the second member must have received partitions"
    assert len(set(everything)) == 1200
    assert len(everything) == 1200, "records read twice: the revoke commit is missing"


def test_levels_split_their_share_of_the_fetch_buffer_over_their_partitions(
    bootstrap_servers, unique_name
):
    """Each level's client asks for its share of fetch_buffer_bytes over its assigned
    partitions per partition (at most 1 MiB per level), so what the levels fetch ahead stays
    within the budget however many partitions there are; a size the caller gives is kept."""
    name = unique_name("orders")
    create_priority_topics(bootstrap_servers, name, 3, num_partitions=4)
    produce(bootstrap_servers, name, {0: 30, 1: 30, 2: 30})

    def sizes(**configs):
        with consumer(bootstrap_servers, name, unique_name("g"), **configs) as c:
            poll_until(c, lambda _: len(c.assignment()) == 12)
            return {
                level.consumer._fetcher.config["max_partition_fetch_bytes"]
                for level in c._levels.values()
            }

    assert sizes() == {(8 << 20) // 3 // 4}
    assert sizes(fetch_buffer_bytes=96 << 20) == {3 << 20}  # at most 1 MiB per level
    assert sizes(fetch_buffer_bytes=1 << 20) == {(1 << 20) // 3 // 4}
    assert sizes(fetch_buffer_bytes=1 << 20, max_partition_fetch_bytes=500_000) == {500_000}


def test_group_members_split_partitions_and_consume_everything_once(
    bootstrap_servers, unique_name
):
    """Two consumers in one group share every level's partitions and read each record once."""
    name = unique_name("orders")
    create_priority_topics(bootstrap_servers, name, 3, num_partitions=2)
    group = unique_name("g")
    results: dict[int, list] = {0: [], 1: []}
    members = [consumer(bootstrap_servers, name, group, **QUICK_SESSIONS) for _ in range(2)]
    # Records only once the group has settled with both members (one partition per level
    # each): produced before, the first member to join could read them all before the second
    # is let in, and the split would be untested.
    consume_together(results, 0, lambda index: members[index].poll(timeout_ms=100),
                     until=lambda: all(len(m.assignment()) == 3 for m in members))
    produce(bootstrap_servers, name, {0: 400, 1: 400, 2: 400}, key_count=50)
    consume_together(results, 1200, lambda index: members[index].poll(timeout_ms=500))
    final = [c.assignment() for c in members]
    for c in members:
        c.close()
    everything = results[0] + results[1]
    assert len(everything) == 1200
    assert len(set(everything)) == 1200
    assert results[0] and results[1], "both members must have received partitions"
    assert not final[0] & final[1]


def test_partitions_added_to_a_priority_topic_are_consumed(bootstrap_servers, topic, unique_name):
    """A partition added while consuming is picked up after a metadata refresh, without restart."""
    produce(bootstrap_servers, topic, {2: 10})
    settings = {"metadata_max_age_ms": 1000, **QUICK_SESSIONS}
    with consumer(bootstrap_servers, topic, unique_name("g"), **settings) as c:
        poll_until(c, lambda r: level_counts(r)[2] > 0)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
        try:
            admin.create_partitions({f"{topic}-2": NewPartitions(total_count=2)})
        finally:
            admin.close()
        with PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=3) as p:
            p.send(topic, b"new", partition=1, priority=2).get(timeout=30)
        got = poll_until(c, lambda r: TopicPartition(f"{topic}-2", 1) in r, timeout_s=60)
        assert got[TopicPartition(f"{topic}-2", 1)][0].value == b"new"


def test_pattern_subscription_covers_every_level(bootstrap_servers, unique_name):
    """subscribe(pattern=...) over logical names reads all levels of matching topics only."""
    prefix = unique_name("pat")
    for name in (f"{prefix}-a", f"{prefix}-b"):
        create_priority_topics(bootstrap_servers, name, 3)
        produce(bootstrap_servers, name, {0: 5, 1: 5, 2: 5})
    c = PriorityConsumer(
        bootstrap_servers=bootstrap_servers, group_id=unique_name("g"), max_priority=3,
        auto_offset_reset="earliest", consumer_timeout_ms=3000, metadata_max_age_ms=1000,
    )
    with c:
        c.subscribe(pattern=f"{prefix}-a")
        topics = Counter(record.topic for record in c)
        assert c.subscription() == {f"{prefix}-a"}
    assert topics == {f"{prefix}-a-0": 5, f"{prefix}-a-1": 5, f"{prefix}-a-2": 5}


def test_assign_routes_partitions_to_their_levels(bootstrap_servers, topic):
    """assign() of priority-topic partitions reads exactly those, with no group."""
    produce(bootstrap_servers, topic, {0: 5, 1: 5, 2: 5})
    c = PriorityConsumer(
        bootstrap_servers=bootstrap_servers, max_priority=3, auto_offset_reset="earliest",
        consumer_timeout_ms=2000,
    )
    with c:
        wanted = {TopicPartition(f"{topic}-2", 0), TopicPartition(f"{topic}-0", 0)}
        c.assign(wanted)
        assert c.assignment() == wanted
        c.seek_to_beginning()
        assert Counter(r.topic for r in c) == {f"{topic}-2": 5, f"{topic}-0": 5}
        ends = c.end_offsets(wanted)
        assert ends == dict.fromkeys(wanted, 5)
        assert c.beginning_offsets(wanted) == dict.fromkeys(wanted, 0)


def test_commit_async_calls_back_once_with_all_levels(bootstrap_servers, topic, unique_name):
    """commit_async's callback runs once, with every level's offsets merged."""
    produce(bootstrap_servers, topic, {0: 20, 1: 20, 2: 20})
    calls = []
    with consumer(bootstrap_servers, topic, unique_name("g"), enable_auto_commit=False) as c:
        # Until every level has returned records, in one poll or several (under load the
        # levels' first fetches arrive apart: one poll holding all three may never come).
        levels: set[int] = set()
        deadline = time.monotonic() + 30
        while len(levels) < 3:
            assert time.monotonic() < deadline, f"levels returned: {sorted(levels)}"
            levels |= set(level_counts(c.poll(timeout_ms=500)))
        future = c.commit_async(callback=lambda offsets, response: calls.append(offsets))
        deadline = time.monotonic() + 30
        while not future.is_done and time.monotonic() < deadline:
            c.poll(timeout_ms=100)
        assert future.succeeded(), future.exception
        assert len(calls) == 1
        assert {tp.topic for tp in calls[0]} == {f"{topic}-{level}" for level in range(3)}
        for tp, offset in calls[0].items():
            assert c.committed(tp) == offset.offset


def test_deserializer_failure_names_the_record_and_seeking_past_it_skips_only_it(
    bootstrap_servers, topic, unique_name
):
    """A record the deserializer rejects raises DeserializationError naming it (with its raw
    bytes); records before it are returned; seeking past it skips exactly that record."""
    produce(bootstrap_servers, topic, {1: 2, 2: 3, 0: 3})

    def deserialize(value):
        if value.startswith(b"1:0:"):
            raise ValueError("bad record")
        return value

    seen: Counter = Counter()
    errors = []
    with consumer(
        bootstrap_servers, topic, unique_name("g"), value_deserializer=deserialize,
        enable_auto_commit=False,
    ) as c:
        deadline = time.monotonic() + 30
        while len(seen) < 7 and time.monotonic() < deadline:
            try:
                for batch in c.poll(timeout_ms=200).values():
                    seen.update((r.topic, r.offset) for r in batch)
            except DeserializationError as error:
                errors.append((error.topic, error.offset, error.value[:4]))
                c.seek(TopicPartition(error.topic, error.partition), error.offset + 1)
    assert errors == [(f"{topic}-1", 0, b"1:0:")]
    sizes = {0: 3, 1: 2, 2: 3}
    expected = {(f"{topic}-{lv}", i) for lv, n in sizes.items() for i in range(n)}
    assert seen == Counter(expected - {(f"{topic}-1", 0)})


def test_idle_poll_wakes_for_a_high_priority_record(bootstrap_servers, topic, unique_name):
    """A record sent to the top level while poll() waits ends the wait long before its timeout."""
    with consumer(bootstrap_servers, topic, unique_name("g"), auto_offset_reset="latest") as c:
        c.poll(timeout_ms=2000)  # join all three groups
        sender = threading.Timer(
            1.0, produce, args=(bootstrap_servers, topic, {2: 1}),
        )
        sender.start()
        start = time.monotonic()
        records = c.poll(timeout_ms=20000)
        waited = time.monotonic() - start
        sender.join()
    assert level_counts(records) == {2: 1}
    assert waited < 5.0


def test_bad_configuration_fails_with_clear_messages(bootstrap_servers, topic):
    """Bad settings are rejected up front, naming the setting and the value."""
    # Without topics there is nothing to discover the levels from (with them, see
    # test_levels_are_discovered_from_the_broker).
    with pytest.raises(ConfigError, match="'max_priority' is required unless topics"):
        PriorityConsumer(bootstrap_servers=bootstrap_servers)
    with pytest.raises(ValueError, match="at least 7 for 3 priority levels"):
        PriorityConsumer(bootstrap_servers=bootstrap_servers, max_priority=3, max_poll_records=5)
    with pytest.raises(ConfigError, match="max_poll_history_window_size"):
        PriorityConsumer(
            bootstrap_servers=bootstrap_servers, max_priority=3,
            **{"max.poll.history.window.size": 3, "min.poll.window.maxout.threshold": 4},
        )
    from kafka.errors import KafkaConfigurationError

    with pytest.raises(KafkaConfigurationError, match="no_such_setting"):
        PriorityConsumer(bootstrap_servers=bootstrap_servers, max_priority=3, no_such_setting=1)


def test_java_style_properties_are_accepted(bootstrap_servers, topic, unique_name):
    """from_properties takes the dotted keys of the Java client and the Flipkart original."""
    produce(bootstrap_servers, topic, {2: 3})
    c = PriorityConsumer.from_properties(
        {
            "bootstrap.servers": bootstrap_servers, "group.id": unique_name("g"),
            "max.priority": 3, "max.poll.records": 21, "auto.offset.reset": "earliest",
            "consumer.timeout.ms": 3000,
        },
        topic,
    )
    with c:
        assert c.reserved_quotas == {2: 12, 1: 6, 0: 3}
        assert len(list(c)) == 3


def test_from_properties_reads_a_file_of_text_values(bootstrap_servers, topic, unique_name,
                                                     tmp_path):
    """A .properties file gives every value as a string (Java's syntax: `=`, `:`, comments,
    continuations); each becomes its setting's type, and overrides win."""
    produce(bootstrap_servers, topic, {0: 2, 2: 3})
    path = tmp_path / "consumer.properties"
    path.write_text(
        f"# billing\nbootstrap.servers={bootstrap_servers}\ngroup.id: {unique_name('g')}\n"
        "max.priority=3\nmax.poll.records = 21\nsession.timeout.ms=10000\n"
        "fetch.max.wait.ms=\\\n    100\nenable.auto.commit=false\nauto.offset.reset=earliest\n",
        encoding="utf-8")
    c = PriorityConsumer.from_properties(str(path), topic, consumer_timeout_ms="3000")
    with c:
        assert c.reserved_quotas == {2: 12, 1: 6, 0: 3}
        assert sorted(record.topic for record in c) == [f"{topic}-0"] * 2 + [f"{topic}-2"] * 3


def test_closed_consumer_refuses_calls(bootstrap_servers, topic, unique_name):
    """After close(), calls fail with IllegalStateError (ours and kafka-python's, as code
    written for KafkaConsumer catches) and iteration simply ends."""
    c = consumer(bootstrap_servers, topic, unique_name("g"))
    c.close()
    c.close()  # idempotent, as in kafka-python
    with pytest.raises(IllegalStateError, match="closed"):
        c.poll()
    with pytest.raises(kafka.errors.IllegalStateError, match="closed"):
        c.commit()
    assert list(c) == []


@pytest.mark.parametrize("codec", ["gzip", "lz4", "snappy", "zstd"])
def test_compressed_priority_topics_are_read_by_a_default_install(
    bootstrap_servers, topic, unique_name, codec
):
    """Records compressed with any of Kafka's codecs are read: their libraries are installed."""
    with PriorityProducer(
        bootstrap_servers=bootstrap_servers, max_priority=3, compression_type=codec
    ) as p:
        for i in range(20):
            p.send(topic, f"{codec}:{i}".encode(), priority=i % 3)
        p.flush()
    values = []
    with consumer(bootstrap_servers, topic, unique_name("g")) as c:
        deadline = time.monotonic() + 30
        while len(values) < 20 and time.monotonic() < deadline:
            values += [r.value for batch in c.poll(timeout_ms=500).values() for r in batch]
    assert sorted(values) == sorted(f"{codec}:{i}".encode() for i in range(20))


def test_subscribing_to_a_missing_level_never_creates_it(bootstrap_servers, unique_name, caplog):
    """A PriorityConsumer of a logical topic whose level topics do not exist creates none:
    subscribing raises MissingTopicsError, or with wait_for_topics warns and waits."""
    from kafka import KafkaAdminClient

    from priority_kafka import MissingTopicsError

    missing = unique_name("absent")
    with pytest.raises(MissingTopicsError, match=f"{missing}-0, {missing}-1, {missing}-2 do not"):
        consumer(bootstrap_servers, missing, unique_name("g"))
    with consumer(bootstrap_servers, missing, unique_name("g"), wait_for_topics=True) as c:
        assert f"topics {missing}-0" in caplog.text and "wait_for_topics" in caplog.text
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            c.poll(timeout_ms=200)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        assert not [t for t in admin.list_topics() if t.startswith(missing)]
    finally:
        admin.close()


def test_a_record_produced_after_a_fetch_answer_comes_with_the_next_poll(
    bootstrap_servers, topic, unique_name
):
    """kafka-python sends a level's fetch only when a poll finds nothing buffered, and a poll
    that waited for an answer sends none after it (FETCH_SENT_ONLY_IN_POLL): records produced
    between two polls reach the client only with the fetch the next poll sends, one poll later
    (without the chase, that poll returns nothing here). The poll chases the fetch it sent, so
    r1 and r2 come with it."""
    from priority_kafka.kafka_python._kafka import JOIN_POLL_MS
    from priority_kafka.kafka_python.consumer._polling import PollTiming

    timing = PollTiming(join_wait_ms=JOIN_POLL_MS, chase_wait_ms=5_000, chase_gap_share=1.0)
    c = consumer(bootstrap_servers, topic, unique_name("chase"), poll_timing=timing)
    try:
        with PriorityProducer(bootstrap_servers=bootstrap_servers, max_priority=3) as p:
            p.send(topic, b"r0", priority=2).get(30)
            poll_until(c, lambda records: level_counts(records)[2] == 1)
            p.send(topic, b"r1", priority=2).get(30)
            # Apart in time, as records of a steady trickle come (were a fetch in flight, it
            # would be answered with r1 alone).
            time.sleep(0.2)
            p.send(topic, b"r2", priority=2).get(30)
        records = c.poll(timeout_ms=0)
        assert [r.value for batch in records.values() for r in batch] == [b"r1", b"r2"]
    finally:
        c.close()
