"""PriorityShareConsumer (experimental) against the real local broker's share groups."""

from __future__ import annotations

import copy
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType
from helpers import level_of, produce
from share_helpers import share_consumer

from priority_kafka.burst import allocate
from priority_kafka.confluent import InvalidArgError, PriorityProducer, PriorityShareConsumer

pytestmark = pytest.mark.integration


def poll_until(c: PriorityShareConsumer, done: Any, timeout_s: float = 60.0) -> list[Any]:
    """Poll (ACCEPTing every message) until ``done(all messages so far)``; return them all."""
    seen: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while not done(seen):
        assert time.monotonic() < deadline, f"{len(seen)} messages in {timeout_s} s"
        for message in c.poll(0.5):
            assert message.error() is None, message.error()
            seen.append(message)
            c.acknowledge(message)
    return seen


def test_rounds_follow_the_quotas_highest_first_and_each_message_comes_once(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """Every round returns at most max.poll.records, highest level first, each level what the
    burst rule's quotas allow of what it has acquired (allocate over the consumer's
    CapacityBurst, as read before the round: the rule of the other consumers); every message
    is delivered once and ACCEPTed."""
    rounds: list[Counter[int]] = []
    with share_consumer(bootstrap_servers, topic, unique_name("share"),
                        **{"max.poll.records": 50}) as c:
        # One message per level first: once each has come, every level's share group is
        # joined and fetching, so the backlog reaches the levels together.
        produce(bootstrap_servers, topic, {0: 1, 1: 1, 2: 1})
        seen = poll_until(c, lambda seen: {level_of(m) for m in seen} == {0, 1, 2})
        produce(bootstrap_servers, topic, {0: 150, 1: 150, 2: 150})
        deadline = time.monotonic() + 60
        while len(seen) < 453:
            assert time.monotonic() < deadline, f"{len(seen)} of 453"
            # The rule as it stands before this round (a copy: quotas() counts a burst), asked
            # as poll() asks it; a poll that returns nothing records no round.
            rule = copy.deepcopy(c.burst)
            quotas, bursting = rule.quotas(), rule.bursting_level
            batch = c.poll(0.5)
            if not batch:
                continue
            got = Counter(level_of(m) for m in batch)
            available = {level: got[level] + m["buffered"] for level, m in c.metrics().items()}
            expected = allocate(quotas, available, 50, bursting)
            assert got == Counter({lv: n for lv, n in expected.items() if n}), (got, expected)
            levels = [level_of(m) for m in batch]
            assert levels == sorted(levels, reverse=True)
            rounds.append(got)
            for message in batch:
                c.acknowledge(message)
            seen += batch
        c.commit_sync(30)
        metrics = c.metrics()
    assert all(sum(got.values()) <= 50 for got in rounds), rounds
    assert len({(m.topic(), m.offset()) for m in seen}) == 453
    assert {m.delivery_count() for m in seen} == {1}
    assert all(m["accepted"] == m["delivered"] == 151 and m["redelivered"] == 0
               for m in metrics.values()), metrics


def first_batch(c: PriorityShareConsumer, timeout_s: float = 60.0) -> list[Any]:
    """The first non-empty poll() of ``c``."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert time.monotonic() < deadline, "nothing delivered"
        batch = c.poll(0.5)
        if batch:
            return batch


def test_close_releases_what_was_not_acknowledged_to_the_next_member(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """Messages acquired and not acknowledged are RELEASEd on close(): the next member gets
    exactly those again, with delivery count 2, and none of the ACCEPTed ones."""
    produce(bootstrap_servers, topic, {2: 20})
    group = unique_name("release")
    with share_consumer(bootstrap_servers, topic, group) as first:
        batch = first_batch(first)
        offsets = [m.offset() for m in batch]
        assert len(offsets) > 5 and offsets == sorted(offsets)
        for message in batch[:5]:
            first.acknowledge(message)
    assert first.metrics()[2]["released"] == len(offsets) - 5
    with share_consumer(bootstrap_servers, topic, group) as second:
        again = poll_until(second, lambda seen: len(seen) >= 15)
    # The first member's RELEASEd ones again, then the rest of the 20.
    assert sorted(m.offset() for m in again) == list(range(5, 20))
    assert {m.offset() for m in again if m.delivery_count() == 2} == set(offsets[5:])


def test_a_rejected_message_is_never_delivered_again(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """A REJECTed message is archived: a later member of the group gets the messages produced
    after it, never it."""
    produce(bootstrap_servers, topic, {1: 10})
    group = unique_name("reject")
    with share_consumer(bootstrap_servers, topic, group) as first:
        batch = first_batch(first)
        for message in batch:
            first.acknowledge(message, AcknowledgeType.REJECT if message.offset() == 3
                              else AcknowledgeType.ACCEPT)
        first.commit_sync(30)
        assert first.metrics()[1]["rejected"] == 1
    produce(bootstrap_servers, topic, {1: 1})  # offset 10
    with share_consumer(bootstrap_servers, topic, group) as second:
        later = poll_until(second, lambda seen: len(seen) >= 1)
    assert [m.offset() for m in later] == [10]


def test_bad_settings_and_acknowledgements_are_refused_with_their_names() -> None:
    """Implicit acknowledgement, a missing group.id, a misspelt property, an unknown ack_type,
    and acknowledging a message that was not handed out are InvalidArgErrors naming what is
    wrong."""
    base = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "max.priority": 3}
    with pytest.raises(InvalidArgError, match=r"'share\.acknowledgement\.mode' must "
                                              r"be 'explicit'.*got 'implicit'"):
        PriorityShareConsumer({**base, "share.acknowledgement.mode": "implicit"})
    with pytest.raises(InvalidArgError, match=r"'group\.id' is required"):
        PriorityShareConsumer({**base, "group.id": ""})
    with pytest.raises(InvalidArgError, match=r"'fetch\.max\.wait\.ms'; did you mean "
                                              r"'fetch\.wait\.max\.ms'\?"):
        PriorityShareConsumer({**base, "fetch.max.wait.ms": "100"})
    with PriorityShareConsumer({**base, "max.priority": "3", "max.poll.records": "50"}) as c:
        assert c.max_poll_records == 50  # our keys as text, as a .properties file gives them
    from confluent_kafka import Message

    with PriorityShareConsumer(base) as c:
        stranger = Message(topic="jobs-2", partition=0, offset=7)
        with pytest.raises(InvalidArgError, match="'ack_type' must be an AcknowledgeType"):
            c.acknowledge(stranger, "yes")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgError, match=r"jobs-2\[0\]@7 was not returned"):
            c.acknowledge(stranger)
        with pytest.raises(InvalidArgError, match="outside"):
            c.acknowledge(Message(topic="jobs-5", partition=0, offset=0))


def test_the_share_consumer_shows_its_levels_as_every_front_end() -> None:
    """``levels`` (PriorityFront's, as the PriorityConsumers') holds the reserved shares and
    ``priority_of``, which names a topic of no level."""
    base = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "max.priority": 3}
    with PriorityShareConsumer(base) as c:
        assert c.levels.reserved == c.reserved_quotas == {2: 287, 1: 142, 0: 71}
        assert [c.levels.level_of(f"jobs-{n}") for n in (2, 0)] == [2, 0]
        with pytest.raises(InvalidArgError, match=r"'jobs-3' has priority 3, outside \[0, 3\)"):
            c.priority_of("jobs-3")
        with pytest.raises(InvalidArgError, match="jobs"):
            c.priority_of("jobs")


def test_a_level_acquires_at_most_max_poll_records_of_small_batches(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """Each level's fetch asks the broker for max.poll.records records: with producer batches
    of at most 5 records, a level acquires 20 to 24 at a time out of a backlog of 100 (the
    broker rounds up to whole batches, see docs/share-groups.md; librdkafka closes a batch at
    linger.ms too, so batch edges need not fall on the 20th record: seen 21 under load)."""
    producer = PriorityProducer({"bootstrap.servers": bootstrap_servers, "max.priority": 3,
                                 "linger.ms": 5, "batch.num.messages": 5})
    for i in range(100):
        producer.produce(topic, f"1:{i}".encode(), priority=1)
    assert producer.flush(30) == 0
    with share_consumer(bootstrap_servers, topic, unique_name("limit"),
                        **{"max.poll.records": 20}) as c:
        batch = first_batch(c)
        assert len(batch) <= 20
        for message in batch:
            c.acknowledge(message)
        acquired = c.metrics()[1]["delivered"]
    assert 0 < acquired <= 20 + 5 - 1
