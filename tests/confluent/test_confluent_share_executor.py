"""ShareExecutor (experimental) against the real local broker's share groups."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer
from helpers import produce
from share_helpers import Running, share_consumer, wait_for

from priority_kafka import create_priority_topics
from priority_kafka.confluent import PriorityProducer, ShareExecutor, ShareRecord
from priority_kafka.errors import HandlerError

pytestmark = pytest.mark.integration

FAST = {"retry_backoff_ms": 1, "retry_backoff_max_ms": 1, "drain_timeout_ms": 5000}


def leftovers(servers: str, topic: str, group: str, level: int, produced: int
              ) -> list[tuple[int, int]]:
    """(offset, delivery count) of what a new member of ``group`` gets of ``level`` (one
    partition, ``produced`` records so far): a sentinel is produced after them, and a share
    partition hands out its available records lowest offset first, so whatever is left of the
    first ``produced`` comes before the sentinel or with it."""
    produce(servers, topic, {level: 1})
    got: list[tuple[int, int]] = []
    with share_consumer(servers, topic, group) as member:
        deadline = time.monotonic() + 60
        while produced not in {offset for offset, _ in got}:
            assert time.monotonic() < deadline, got
            for message in member.poll(0.5):
                assert message.error() is None, message.error()
                got.append((message.offset(), message.delivery_count()))
                member.acknowledge(message)
    return sorted(item for item in got if item[0] != produced)


def test_every_record_is_handled_once_and_accepted_only_after_its_handler(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """Each record of every level is handled once (delivery count 1) and ACCEPTed when its
    handler returns, not before: a held record stays outstanding while the rest are ACCEPTed;
    afterwards a new member of the groups gets nothing of them."""
    produce(bootstrap_servers, topic, {0: 100, 1: 100, 2: 100})
    group = unique_name("accept")
    gate = threading.Event()
    seen: list[tuple[str, int, int]] = []

    def handler(record: ShareRecord) -> None:
        if record.level == 2 and record.offset == 0:
            gate.wait(30)
        seen.append((record.topic, record.offset, record.delivery_count))

    executor = ShareExecutor(share_consumer(bootstrap_servers, topic, group), handler,
                             shards=4, **FAST)
    def all_but_the_held_one() -> bool:
        level = executor.stats().levels[2]
        return level.accepted > 0 and level.accepted == level.acquired - 1

    with Running(executor):
        # The held record keeps its poll open: the level acquires nothing more meanwhile.
        wait_for(all_but_the_held_one, what="all of the poll but the held record accepted")
        held = executor.stats().levels[2]
        assert (f"{topic}-2", 0, 1) not in seen
        gate.set()
        wait_for(lambda: executor.stats().total("accepted") == 300, what="300 accepted")
    assert held.outstanding == 1
    assert len(seen) == 300 and len(set(seen)) == 300
    assert {count for _, _, count in seen} == {1}
    stats = executor.stats()
    for level, figures in stats.levels.items():
        assert (figures.acquired, figures.accepted, figures.redelivered, figures.released,
                figures.archived, figures.outstanding) == (100, 100, 0, 0, 0, 0), level
        assert figures.delivery_counts == {1: 100}
    assert leftovers(bootstrap_servers, topic, group, 2, 100) == []


def test_stop_releases_what_did_not_finish_and_another_member_gets_it(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """On stop the running record finishes and is ACCEPTed; every other record acquired is
    RELEASEd, and a new member gets exactly those, with delivery count 2."""
    produce(bootstrap_servers, topic, {1: 50})
    group = unique_name("stop")
    gate = threading.Event()
    ran: list[int] = []

    def handler(record: ShareRecord) -> None:
        ran.append(record.offset)
        gate.wait(30)

    executor = ShareExecutor(share_consumer(bootstrap_servers, topic, group), handler,
                             shards=1, **FAST)
    with Running(executor):
        wait_for(lambda: ran and executor.stats().levels[1].acquired > 1, what="acquired")
        executor.stop()
        wait_for(lambda: executor.stats().queued == 0, what="queued records dropped")
        gate.set()
    stats = executor.stats().levels[1]
    assert ran and stats.accepted == len(ran) == 1
    assert stats.released == stats.acquired - 1 and stats.outstanding == 0
    again = leftovers(bootstrap_servers, topic, group, 1, 50)
    released = [offset for offset, count in again if count == 2]
    assert len(released) == stats.released and ran[0] not in released
    assert sorted([*ran, *(offset for offset, _ in again)]) == list(range(50))


def test_what_cannot_start_in_time_is_released_at_once_to_another_member(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """A member whose only worker is stuck RELEASEs the rest of its poll release_after_ms
    after acquiring it (its lock still has half to run): a second member handles them, with
    delivery count 2; every record is handled once."""
    produce(bootstrap_servers, topic, {0: 40})
    group = unique_name("early")
    gate = threading.Event()
    first: list[int] = []
    second: list[tuple[int, int]] = []

    def stuck(record: ShareRecord) -> None:
        first.append(record.offset)
        gate.wait(30)

    def fast(record: ShareRecord) -> None:
        second.append((record.offset, record.delivery_count))

    a = ShareExecutor(share_consumer(bootstrap_servers, topic, group), stuck, shards=1,
                      release_after_ms=1000, **FAST)
    with Running(a):
        wait_for(lambda: first and a.stats().levels[0].acquired > 1, what="A acquired")
        b = ShareExecutor(share_consumer(bootstrap_servers, topic, group), fast, shards=2,
                          **FAST)
        with Running(b):
            wait_for(lambda: len(second) == 39, what="B handled the rest")
        gate.set()
        wait_for(lambda: a.stats().levels[0].accepted == 1, what="A accepted its record")
    stats = a.stats().levels[0]
    assert stats.released_unstarted == stats.released == stats.acquired - 1
    assert sum(count == 2 for _, count in second) == stats.released_unstarted
    assert sorted([*first, *(offset for offset, _ in second)]) == list(range(40))
    assert b.stats().levels[0].accepted == 39


def test_a_record_running_past_its_lock_is_released_and_its_outcome_dropped(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """With a 1 s lock, a record whose handler is still running when the lock ends is
    RELEASEd (the level polls on); it comes again (here to this member's other worker) and
    that delivery is ACCEPTed; the first run's late success does not count."""
    produce(bootstrap_servers, topic, {2: 1})
    group = unique_name("lock")
    gate = threading.Event()
    deliveries: list[int] = []

    def handler(record: ShareRecord) -> None:
        deliveries.append(record.delivery_count)
        if record.delivery_count == 1:
            gate.wait(30)

    consumer = share_consumer(bootstrap_servers, topic, group,
                              group_configs={"share.record.lock.duration.ms": 1000})
    executor = ShareExecutor(consumer, handler, shards=2, **FAST)
    with Running(executor):
        wait_for(lambda: executor.stats().levels[2].accepted == 1, what="second delivery")
        gate.set()
        wait_for(lambda: executor.stats().running == 0, what="the first run ended")
    stats = executor.stats().levels[2]
    assert deliveries == [1, 2]
    assert (stats.lock_expired, stats.released, stats.accepted, stats.redelivered) == (1, 1, 1, 1)
    assert stats.delivery_counts == {1: 1, 2: 1}


@pytest.mark.parametrize("policy", ["reject", "callback"])
def test_a_record_that_keeps_failing_is_rejected_and_never_comes_again(
    policy: str, bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """After max_attempts calls a failing record is REJECTed (by the policy, or by what the
    callback returns); the others are ACCEPTed, and no member gets it again."""
    produce(bootstrap_servers, topic, {1: 10})
    group = unique_name(policy)
    calls: Counter[int] = Counter()
    failures: list[tuple[int, int, str]] = []

    def handler(record: ShareRecord) -> None:
        calls[record.offset] += 1
        if record.offset == 3:
            raise ValueError("bad record")

    def on_failure(record: ShareRecord, error: BaseException, attempts: int) -> Any:
        failures.append((record.offset, attempts, str(error)))
        return AcknowledgeType.REJECT

    executor = ShareExecutor(
        share_consumer(bootstrap_servers, topic, group), handler, shards=2,
        failure_policy=policy, max_attempts=2,
        on_failure=on_failure if policy == "callback" else None, **FAST,
    )
    with Running(executor):
        wait_for(lambda: executor.stats().levels[1].accepted == 9
                 and executor.stats().levels[1].rejected == 1, what="9 accepted, 1 rejected")
    assert calls[3] == 2 and set(calls.values()) == {1, 2}
    assert failures == ([(3, 2, "bad record")] if policy == "callback" else [])
    assert leftovers(bootstrap_servers, topic, group, 1, 10) == []


def test_release_policy_gives_a_failing_record_back_until_the_delivery_limit_archives_it(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """Under "release" a failing record is RELEASEd and delivered again, until the group's
    delivery limit (2 here): the last release archives it, counted as archived; no member
    gets it again."""
    produce(bootstrap_servers, topic, {0: 5})
    group = unique_name("release")
    deliveries: list[int] = []

    def handler(record: ShareRecord) -> None:
        if record.offset == 2:
            deliveries.append(record.delivery_count)
            raise ValueError("bad record")

    consumer = share_consumer(bootstrap_servers, topic, group,
                              group_configs={"share.delivery.count.limit": 2})
    executor = ShareExecutor(consumer, handler, shards=2, failure_policy="release",
                             max_attempts=1, **FAST)
    with Running(executor):
        wait_for(lambda: executor.stats().levels[0].archived == 1, what="archived")
        wait_for(lambda: executor.stats().levels[0].accepted == 4, what="4 accepted")
    stats = executor.stats().levels[0]
    assert deliveries == [1, 2]
    assert (stats.released, stats.redelivered, stats.rejected) == (2, 1, 0)
    assert leftovers(bootstrap_servers, topic, group, 0, 5) == []


def test_dead_letter_policy_sends_the_record_then_accepts_it(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """Under "dead_letter" a failing record goes to the dead-letter topic with the headers
    naming it, and is ACCEPTed once the broker has the dead letter."""
    dead = unique_name("dead")
    create_priority_topics(bootstrap_servers, dead, 1)
    produce(bootstrap_servers, topic, {2: 5})
    group = unique_name("dlq")

    def handler(record: ShareRecord) -> None:
        if record.offset == 1:
            raise ValueError("bad record")

    executor = ShareExecutor(
        share_consumer(bootstrap_servers, topic, group), handler, shards=2,
        failure_policy="dead_letter", dead_letter_topic=f"{dead}-0", max_attempts=2, **FAST,
    )
    with Running(executor):
        wait_for(lambda: executor.stats().levels[2].accepted == 5, what="5 accepted")
    assert executor.stats().dead_lettered == 1
    reader = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": unique_name("r"),
                       "auto.offset.reset": "earliest"})
    try:
        reader.subscribe([f"{dead}-0"])
        deadline = time.monotonic() + 30
        message = None
        while message is None or message.error() is not None:
            assert time.monotonic() < deadline, "no dead letter"
            message = reader.poll(0.5)
        headers = dict(message.headers() or [])
        assert message.value() == b"2:1"
        assert headers["dead_letter.offset"] == b"1" and headers["dead_letter.attempts"] == b"2"
        assert headers["dead_letter.topic"] == f"{topic}-2".encode()
    finally:
        reader.close()
    assert leftovers(bootstrap_servers, topic, group, 2, 5) == []


def test_stop_policy_releases_the_failed_record_and_raises(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """Under "stop" a failing record stops the executor: run() raises HandlerError naming it,
    after RELEASing it (and whatever else did not finish): another member gets it again."""
    produce(bootstrap_servers, topic, {0: 5})
    group = unique_name("halt")
    handled: list[int] = []

    def handler(record: ShareRecord) -> None:
        if record.offset == 2:
            raise ValueError("bad record")
        handled.append(record.offset)

    executor = ShareExecutor(share_consumer(bootstrap_servers, topic, group), handler,
                             shards=1, max_attempts=1, **FAST)
    with Running(executor) as running:
        running.join()
    error = running.error
    assert isinstance(error, HandlerError), error
    assert (error.topic, error.offset, error.policy) == (f"{topic}-0", 2, "stop")
    stats = executor.stats().levels[0]
    assert stats.accepted + stats.released == stats.acquired and stats.outstanding == 0
    assert stats.accepted == len(handled)
    again = dict(leftovers(bootstrap_servers, topic, group, 0, 5))
    assert again[2] == 2 and sum(count == 2 for count in again.values()) == stats.released
    assert sorted([*handled, *again]) == list(range(5))


def test_an_urgent_record_overtakes_a_bulk_flood_and_comes_once(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """Under a flood of 10,000 level-0 records an urgent level-2 record is handled while most
    of the flood still waits (at the next free worker, not after the flood), once, with
    delivery count 1; every bulk record is handled once, nothing is released or archived."""
    bulk = 10_000
    producer = PriorityProducer({"bootstrap.servers": bootstrap_servers, "max.priority": 3,
                                 "linger.ms": 20})
    for _ in range(bulk):
        producer.produce(topic, b"bulk", priority=0)
    assert producer.flush(30) == 0
    group = unique_name("flood")
    lock = threading.Lock()
    handled: Counter[int] = Counter()  # bulk offset -> times handled
    urgent: list[tuple[int, int]] = []  # (bulk records left, delivery count)

    def handler(record: ShareRecord) -> None:
        if record.level == 2:
            with lock:
                urgent.append((bulk - len(handled), record.delivery_count))
            return
        time.sleep(0.0005)
        with lock:
            handled[record.offset] += 1

    executor = ShareExecutor(share_consumer(bootstrap_servers, topic, group), handler, shards=4)
    with Running(executor):
        wait_for(lambda: len(handled) >= bulk // 10, what="the flood runs")
        producer.produce(topic, b"urgent", priority=2)
        assert producer.flush(30) == 0
        wait_for(lambda: len(handled) == bulk, timeout_s=120, what="the flood handled")
    assert set(handled.values()) == {1}
    assert len(urgent) == 1 and urgent[0][1] == 1
    assert urgent[0][0] >= bulk // 4, f"only {urgent[0][0]} bulk records were left"
    stats = executor.stats()
    assert stats.levels[0].delivery_counts == {1: bulk} and stats.levels[2].accepted == 1
    assert stats.total("released") == stats.total("archived") == 0


def test_an_async_handler_and_a_consumer_left_open(
    bootstrap_servers: str, topic: str, unique_name: Any
) -> None:
    """An ``async def`` handler runs on the event loop and its records are ACCEPTed; with
    close_consumer=False the acknowledgements are committed on stop and the consumer stays
    open for its owner."""
    produce(bootstrap_servers, topic, {1: 20})
    group = unique_name("async")
    seen: list[int] = []

    async def handler(record: ShareRecord) -> None:
        await asyncio.sleep(0)
        seen.append(record.offset)

    consumer = share_consumer(bootstrap_servers, topic, group)
    executor = ShareExecutor(consumer, handler, shards=2, close_consumer=False, **FAST)
    with Running(executor):
        wait_for(lambda: executor.stats().levels[1].accepted == 20, what="20 accepted")
    assert sorted(seen) == list(range(20))
    assert consumer.poll(0) == []  # still open: nothing left, nothing held
    consumer.close()
    assert leftovers(bootstrap_servers, topic, group, 1, 20) == []
