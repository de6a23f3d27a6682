"""confluent-kafka PriorityConsumer against the real local Apache Kafka broker."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from helpers import (
    consume_levels,
    consume_until,
    consumer,
    counts,
    is_highest_first,
    join,
    level_of,
    produce,
    wait_fetched,
)

from priority_kafka.confluent import InvalidArgError, PriorityConsumer, PriorityProducer

pytestmark = pytest.mark.integration


def test_import_priority_kafka_does_not_load_confluent_kafka() -> None:
    """``import priority_kafka`` works without loading confluent-kafka."""
    probe = "import sys, priority_kafka; print('confluent_kafka' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_quotas_split_each_poll_highest_first(bootstrap_servers: str, topic: str) -> None:
    """With every level backlogged, each consume(50) returns 29/14/7, highest level first."""
    produce(bootstrap_servers, topic, {0: 2000, 1: 2000, 2: 2000})
    c = consumer(bootstrap_servers, "quota", **{"max.poll.records": 50})
    try:
        partitions = [TopicPartition(f"{topic}-{level}", 0, 0) for level in range(3)]
        c.assign(partitions)
        wait_fetched(c, partitions, 2000)
        for _ in range(6):
            batch = c.consume(50, 5.0)
            assert counts(batch) == {2: 29, 1: 14, 0: 7}
            assert is_highest_first(batch)
    finally:
        c.close()


def test_poll_keeps_each_levels_share_over_a_round(bootstrap_servers: str, topic: str) -> None:
    """Single-message poll() serves a round of max.poll.records: 29/14/7 of every 50."""
    produce(bootstrap_servers, topic, {0: 2000, 1: 2000, 2: 2000})
    c = consumer(bootstrap_servers, "poll", **{"max.poll.records": 50})
    try:
        partitions = [TopicPartition(f"{topic}-{level}", 0, 0) for level in range(3)]
        c.assign(partitions)
        wait_fetched(c, partitions, 2000)
        messages = [c.poll(5.0) for _ in range(100)]
        assert counts(messages[:50]) == counts(messages[50:]) == {2: 29, 1: 14, 0: 7}
        assert is_highest_first(messages[:50])
        # The per-level figures, published as each round ends (two rounds so far).
        c.pause([partitions[0]])
        figures = c.level_figures
        assert {lv: f.records_returned for lv, f in figures.items()} == {2: 58, 1: 28, 0: 14}
        assert {lv: f.last_quota for lv, f in figures.items()} == {2: 29, 1: 14, 0: 7}
        assert figures[2].window[-2:] == (29, 29) and figures[0].paused_partitions == 0
        assert c.metrics()[1]["records_returned"] == 28
        c.consume(50, 5.0)  # a round of levels 2 and 1 only
        assert c.level_figures[0].paused_partitions == 1
        assert figures[0].paused_partitions == 0  # an earlier snapshot never changes
    finally:
        c.close()


def test_restart_resumes_from_commits_of_returned_messages(
    bootstrap_servers: str, topic: str
) -> None:
    """A synchronous commit() commits exactly what was returned; a new member resumes there."""
    settings = {"max.poll.records": 50, "enable.auto.commit": False}
    c = consumer(bootstrap_servers, "restart", **settings)
    c.subscribe([topic])
    join(c)
    produce(bootstrap_servers, topic, {0: 2000, 1: 2000, 2: 2000})
    returned = consume_levels(c, {0, 1, 2})
    returned += c.consume(50, 5.0)
    last = {m.topic(): m.offset() for m in returned}
    committed = c.commit(asynchronous=False)
    c.close()
    assert {tp.topic: tp.offset for tp in committed} == {t: o + 1 for t, o in last.items()}
    again = consumer(bootstrap_servers, "restart", **settings)
    try:
        again.subscribe([topic])
        # A level read to its end (2000 messages) has nothing more to resume with.
        expected = {t: o + 1 for t, o in last.items() if o + 1 < 2000}
        first: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while set(first) != set(expected) and time.monotonic() < deadline:
            for m in again.consume(50, 1.0):
                first.setdefault(m.topic(), m.offset())
        assert first == expected
    finally:
        again.close()


def test_auto_commit_never_passes_an_unreturned_message(
    bootstrap_servers: str, topic: str
) -> None:
    """With auto-commit on, the offsets committed (by interval and on close) are exactly the
    returned ones, though librdkafka has fetched far more."""
    c = consumer(bootstrap_servers, "auto", **{"max.poll.records": 50,
                                               "auto.commit.interval.ms": 100})
    c.subscribe([topic])
    join(c)
    produce(bootstrap_servers, topic, {0: 2000, 1: 2000, 2: 2000})
    partitions = [TopicPartition(f"{topic}-{level}", 0) for level in range(3)]
    # Every level's messages queued first: a level fetched alone could otherwise be read to its
    # end (bursting) before the others' first fetch arrives.
    wait_fetched(c, partitions, 2000)
    returned = consume_levels(c, {0, 1, 2})
    for _ in range(5):
        returned += c.consume(50, 5.0)
    last = {m.topic(): m.offset() for m in returned}
    c.pause(partitions)  # keep the returned offsets fixed while the interval commits them
    interval_committed: dict[str, int] = {}
    for _ in range(50):
        interval_committed = {tp.topic: tp.offset for tp in c.committed(partitions, 10)}
        if interval_committed == {t: o + 1 for t, o in last.items()}:
            break
        assert c.consume(10, 0.1) == []
    assert interval_committed == {t: o + 1 for t, o in last.items()}
    c.close()
    fresh = consumer(bootstrap_servers, "auto")
    try:
        after_close = {tp.topic: tp.offset for tp in fresh.committed(partitions, 10)}
    finally:
        fresh.close()
    assert after_close == {t: o + 1 for t, o in last.items()}
    assert all(o + 1 < 2000 for o in last.values())


def test_rebalance_callbacks_get_each_levels_partitions(
    bootstrap_servers: str, topic: str
) -> None:
    """on_assign and on_revoke are called per level with that level's priority-topic
    partitions and this PriorityConsumer, from inside consume()."""
    calls: list[tuple[str, object, list[str]]] = []

    def recorder(kind: str):
        return lambda cons, parts: calls.append((kind, cons, [tp.topic for tp in parts]))

    c = consumer(bootstrap_servers, "callbacks")
    try:
        c.subscribe([topic], on_assign=recorder("assign"), on_revoke=recorder("revoke"))
        while len([k for k, _, _ in calls if k == "assign"]) < 3:
            c.consume(10, 0.5)
        assigned = sorted(t for kind, _, topics in calls if kind == "assign" for t in topics)
        assert assigned == [f"{topic}-0", f"{topic}-1", f"{topic}-2"]
        assert all(cons is c for _, cons, _ in calls)
        c.unsubscribe()
        while len([k for k, _, _ in calls if k == "revoke"]) < 3:
            c.consume(10, 0.2)
        revoked = sorted(t for kind, _, topics in calls if kind == "revoke" for t in topics)
        assert revoked == assigned
    finally:
        c.close()


def test_two_members_split_every_levels_partitions(bootstrap_servers: str, topic2: str) -> None:
    """Two members of one group each get one of the two partitions of every level."""
    members = [consumer(bootstrap_servers, "pair") for _ in range(2)]
    try:
        for member in members:
            member.subscribe([topic2])
        levels = {f"{topic2}-{lv}" for lv in range(3)}

        def split(owned: list[set[tuple[str, int]]]) -> bool:
            # Three partitions each is not enough: each level is a group of its own, and one
            # may still have both of its partitions on one member while the others settle.
            return all({t for t, _ in o} == levels and len(o) == 3 for o in owned)

        # A time limit, not a poll count: two rebalances on a loaded machine take seconds.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for member in members:
                member.consume(10, 0.05)
            owned = [{(tp.topic, tp.partition) for tp in m.assignment()} for m in members]
            if split(owned):
                break
        assert split(owned), owned
        assert owned[0] | owned[1] == {(t, p) for t in levels for p in (0, 1)}
    finally:
        for member in members:
            member.close()


def test_assign_pause_resume_and_seek(bootstrap_servers: str, topic: str) -> None:
    """Manual assignment reads only the assigned levels; a paused partition returns nothing
    until resumed; seek moves a level's partition."""
    produce(bootstrap_servers, topic, {0: 3000, 1: 100, 2: 100})
    c = consumer(bootstrap_servers, "manual", **{"max.poll.records": 50})
    high, low = TopicPartition(f"{topic}-2", 0, 0), TopicPartition(f"{topic}-0", 0, 0)
    try:
        c.assign([high, low])
        assert sorted((tp.topic, tp.partition) for tp in c.assignment()) == [
            (low.topic, 0), (high.topic, 0)
        ]
        seen = consume_levels(c, {0, 2})
        assert set(counts(seen)) == {0, 2}
        c.pause([TopicPartition(high.topic, 0)])
        # Level 0 may have been read to its end while level 2's first fetch was on its way
        # (it then bursts alone): give it messages to return while level 2 is paused.
        produce(bootstrap_servers, topic, {0: 100})
        paused = consume_until(c, lambda batch: 0 in counts(batch))
        paused += c.consume(50, 0.5)
        assert set(counts(paused)) == {0}
        c.seek(TopicPartition(high.topic, 0, 5))
        c.resume([TopicPartition(high.topic, 0)])
        resumed = consume_until(c, lambda batch: 2 in counts(batch))
        assert next(m.offset() for m in resumed if level_of(m) == 2) == 5
        assert c.position([TopicPartition(high.topic, 0)])[0].offset > 5
        low_water, high_water = c.get_watermark_offsets(TopicPartition(high.topic, 0), 10)
        assert (low_water, high_water) == (0, 100)
        assert f"{topic}-1" in c.list_topics(timeout=10).topics
    finally:
        c.close()


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"max.priority": 0}, "max.priority"),
        ({"max.priority": None}, "max.priority"),
        ({"max.poll.records": 5}, "max.poll.records"),
        ({"min.poll.window.maxout.threshold": 9}, "min.poll.window.maxout.threshold"),
        ({"max.poll.records.distributor": "fast"}, "max.poll.records.distributor"),
        ({"group.id": ""}, "group_id"),  # librdkafka aborts on an empty group.id
    ],
)
def test_bad_priority_config_names_the_key(
    bootstrap_servers: str, overrides: dict[str, object], key: str
) -> None:
    """A bad priority setting raises confluent's KafkaException (also a ValueError) naming it."""
    config = {"bootstrap.servers": bootstrap_servers, "group.id": "g", "max.priority": 3,
              **overrides}
    config = {k: v for k, v in config.items() if v is not None}
    with pytest.raises(InvalidArgError) as caught:
        PriorityConsumer(config)
    assert isinstance(caught.value, KafkaException) and isinstance(caught.value, ValueError)
    assert key in caught.value.args[0].str()


def test_unknown_librdkafka_property_fails_as_in_confluent(bootstrap_servers: str) -> None:
    """librdkafka's own properties are checked by librdkafka: its _INVALID_ARG error, which
    names the property as given and the nearest one librdkafka documents."""
    with pytest.raises(KafkaException, match=r"no\.such\.property") as caught:
        PriorityConsumer({"bootstrap.servers": bootstrap_servers, "group.id": "g",
                          "max.priority": 3, "no.such.property": 1})
    assert "did you mean" not in caught.value.args[0].str()  # nothing is near it
    with pytest.raises(InvalidArgError) as caught:
        PriorityConsumer({"bootstrap.servers": bootstrap_servers, "group.id": "g",
                          "max.priority": 3, "fetch.max.wait.ms": "100"})
    assert caught.value.args[0].code() == KafkaError._INVALID_ARG
    assert caught.value.args[0].str() == (
        "No such configuration property: 'fetch.max.wait.ms'; did you mean 'fetch.wait.max.ms'?")
    with pytest.raises(InvalidArgError, match=r"did you mean 'linger\.ms'"):
        PriorityProducer({"bootstrap.servers": bootstrap_servers, "max.priority": 3,
                          "linger.msx": "5"})


def test_from_properties_reads_a_file_of_text_values(
    bootstrap_servers: str, topic: str, tmp_path
) -> None:
    """A .properties file, every value a string as Java gives it: our keys become numbers
    (librdkafka takes its own as strings); overrides win."""
    produce(bootstrap_servers, topic, {0: 2, 2: 3})
    path = tmp_path / "consumer.properties"
    path.write_text(
        f"bootstrap.servers={bootstrap_servers}\ngroup.id=props\nmax.priority=3\n"
        "max.poll.records: 21\nauto.offset.reset = earliest\nfetch.wait.max.ms=100\n"
        "message.max.bytes=2000000\n# a comment\n", encoding="utf-8")
    c = PriorityConsumer.from_properties(path, **{"max.poll.records": "28"})
    try:
        assert c.reserved_quotas == {2: 16, 1: 8, 0: 4}
        c.subscribe([topic])
        assert counts(consume_levels(c, {0, 2})) == {2: 3, 0: 2}
    finally:
        c.close()
