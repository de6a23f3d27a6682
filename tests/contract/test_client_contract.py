"""What ShardedExecutor needs of a client (``priority_kafka._types.ClientConsumer``), stated once
and run on every backend: the test fake and each client family's adapter against the broker.

A new family passes this suite before the executor runs on it (docs/architecture.md); a fake
that drifts from the adapters fails it too.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from priority_kafka._structs import OffsetAndMetadata, TopicPartition
from priority_kafka.errors import ConfigError
from priority_kafka.executor import Output
from tests.contract.kits import read_committed

pytestmark = pytest.mark.integration

Polled = dict[TopicPartition, list[Any]]


class Listener:
    """A rebalance listener as the executor passes one (coroutine hooks): records what it is
    told, on which thread; its revoke hook commits asynchronously, as the executor's does."""

    def __init__(self, client: Any, on_revoke: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.client = client
        self.on_revoke = on_revoke
        self.assigned: list[set[TopicPartition]] = []
        self.revoked: list[set[TopicPartition]] = []
        #: Set while the test's thread is inside ``poll()``; each hook notes whether it was.
        self.polling = threading.Event()
        self.inside_poll: list[bool] = []

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.inside_poll.append(self.polling.is_set())
        self.assigned.append({TopicPartition(tp.topic, tp.partition) for tp in assigned})

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.inside_poll.append(self.polling.is_set())
        self.revoked.append({TopicPartition(tp.topic, tp.partition) for tp in revoked})
        if self.on_revoke and revoked:
            await self.client.commit_async(self.on_revoke)

    async def on_partitions_lost(self, lost: Any) -> None:
        await self.on_partitions_revoked(lost)


def poll_until(
    client: Any, done: Callable[[Polled], bool], got: Polled | None = None,
    max_records: int = 500, timeout_s: float = 60.0, hooks: Listener | None = None,
) -> Polled:
    """Poll ``client`` until ``done(records so far)``; each poll's total is at most
    ``max_records``. While a poll runs, ``hooks`` knows it."""
    got = defaultdict(list) if got is None else got
    polling = hooks.polling if hooks is not None else threading.Event()
    deadline = time.monotonic() + timeout_s
    while not done(got):
        counts = {tp: len(records) for tp, records in got.items()}
        assert time.monotonic() < deadline, f"not done in {timeout_s} s: {counts}"
        polling.set()
        try:
            batch = client.poll(timeout_ms=100, max_records=max_records)
        finally:
            polling.clear()
        assert sum(map(len, batch.values())) <= max_records
        for tp, records in batch.items():
            got[TopicPartition(tp.topic, tp.partition)].extend(records)
    return got


def eventually(value: Callable[[], Any], expected: Any, timeout_s: float = 30.0) -> None:
    """Wait until ``value()`` is ``expected`` (what the broker shows after a transaction's
    markers are written, which ``commit`` does not wait for)."""
    deadline = time.monotonic() + timeout_s
    while (seen := value()) != expected:
        assert time.monotonic() < deadline, f"{seen!r}, not {expected!r}, after {timeout_s} s"
        time.sleep(0.1)


def offsets(records: list[Any]) -> list[int]:
    return [record.offset for record in records]


def subscribed(kit: Any, counts: list[int], **listener: Any) -> tuple[Any, Listener]:
    """A client of ``kit`` over ``counts`` records per partition, subscribed with a listener,
    polled until the group assigned it every partition."""
    client = kit.open(counts)
    hooks = Listener(client, listener.get("on_revoke", {}))
    client.subscribe([kit.topic], listener=hooks)
    assert client.subscription() == {kit.topic}
    return client, hooks


def assigned(client: Any, tps: list[TopicPartition]) -> Callable[[Polled], bool]:
    return lambda got: client.assignment() == set(tps)


def test_poll_returns_each_partition_in_offset_order_within_max_records(kit: Any) -> None:
    """Every record comes once, each partition's in offset order with its key and value, never
    more than ``max_records`` a poll."""
    client, _ = subscribed(kit, [5, 4])
    got = poll_until(client, lambda got: sum(map(len, got.values())) >= 9, max_records=3)
    assert {tp: offsets(records) for tp, records in got.items()} == {
        kit.tps[0]: [0, 1, 2, 3, 4], kit.tps[1]: [0, 1, 2, 3],
    }
    first = got[kit.tps[0]][2]
    assert (first.topic, first.partition, first.key, first.value) == (
        kit.topic, 0, b"k2", b"v2",
    )


def test_a_paused_partition_returns_nothing_until_resumed_then_goes_on(kit: Any) -> None:
    """``pause`` holds a partition's records back (``paused()`` names it) while the others
    flow; after ``resume`` it goes on where it stopped, nothing lost or repeated."""
    client, _ = subscribed(kit, [6, 6])
    held, other = kit.tps
    got = poll_until(client, assigned(client, kit.tps))
    client.pause(held)
    assert client.paused() == {held}
    before = len(got[held])
    poll_until(client, lambda got: len(got[other]) == 6, got)
    assert len(got[held]) == before
    client.resume(held)
    assert client.paused() == set()
    poll_until(client, lambda got: len(got[held]) == 6, got)
    assert offsets(got[held]) == list(range(6))


def test_seek_moves_a_partition_back(kit: Any) -> None:
    """After ``seek(tp, 1)`` the partition is read again from offset 1."""
    client, _ = subscribed(kit, [4])
    (tp,) = kit.tps
    got = poll_until(client, lambda got: len(got[tp]) == 4)
    client.seek(tp, 1)
    poll_until(client, lambda got: len(got[tp]) == 7, got)
    assert offsets(got[tp]) == [0, 1, 2, 3, 1, 2, 3]


def test_commit_stores_the_offset_and_its_metadata(kit: Any) -> None:
    """A synchronous commit is what ``fetch_committed`` then reads, metadata included; a
    partition never committed has no entry."""
    client, _ = subscribed(kit, [3, 1])
    poll_until(client, assigned(client, kit.tps))
    client.commit({kit.tps[0]: OffsetAndMetadata(2, "done-to-2", -1)})
    committed = client.fetch_committed(kit.tps)
    assert set(committed) == {kit.tps[0]}
    assert (committed[kit.tps[0]].offset, committed[kit.tps[0]].metadata) == (2, "done-to-2")


def test_the_revoke_hook_runs_inside_poll_and_its_async_commit_lands(kit: Any) -> None:
    """When the group takes the partitions back, the listener's revoke hook runs inside
    ``poll()``, and a ``commit_async`` it awaits is committed."""
    final = OffsetAndMetadata(1, "at-revoke", -1)
    client, hooks = subscribed(kit, [2, 2], on_revoke={})
    poll_until(client, assigned(client, kit.tps), hooks=hooks)
    hooks.on_revoke = {kit.tps[1]: final}
    kit.revoke(client, hooks)
    poll_until(client, lambda got: any(hooks.revoked), hooks=hooks)
    assert set(kit.tps) in hooks.revoked
    # Inside poll(): on the polling thread, or (kafka-python) its IO thread while the polling
    # thread waits in poll(); either way never while the caller does something else.
    assert hooks.inside_poll and all(hooks.inside_poll), hooks.inside_poll
    committed = client.fetch_committed([kit.tps[1]])
    assert (committed[kit.tps[1]].offset, committed[kit.tps[1]].metadata) == (1, "at-revoke")


def test_dead_letters_go_through_the_given_producer_and_a_bad_one_is_refused(kit: Any) -> None:
    """A producer of the backend's kind sends a dead letter's stored bytes as they are; an
    object without ``send`` is refused when checked, naming it."""
    client, _ = subscribed(kit, [1])
    sender = client.dead_letter_producer(kit.producer())()
    try:
        sender.send(f"{kit.topic}-dlt", value=b"dead", key=b"k", headers=None).get(timeout=30)
    finally:
        sender.close()
    assert read_committed(kit.bootstrap_servers, f"{kit.topic}-dlt", 1) == [(b"k", b"dead")]
    with pytest.raises(ConfigError, match=r"dead_letter_producer.*send"):
        client.dead_letter_producer(object())


def test_a_transaction_commits_outputs_and_offsets_together(kit: Any) -> None:
    """The client's transactional sender commits an output and the group's offsets in one
    transaction (each group with its member's metadata); an object that is not the family's
    producer is refused, naming the setting."""
    client, _ = subscribed(kit, [2])
    (tp,) = kit.tps
    poll_until(client, lambda got: len(got[tp]) == 2)
    sender = client.transactions(kit.transactional_producer(client), owned=True)
    try:
        sender.init()
        sender.begin()
        sender.send(Output(f"{kit.topic}-out", value=b"out", key=b"k"))
        for group_metadata, group_offsets in client.transaction_groups(
            {tp: OffsetAndMetadata(2, "", -1)}
        ):
            sender.send_offsets(group_offsets, group_metadata)
        sender.commit()
    finally:
        sender.close()
    eventually(lambda: getattr(client.fetch_committed([tp]).get(tp), "offset", None), 2)
    assert kit.transaction_outputs(f"{kit.topic}-out", 1) == [(b"k", b"out")]
    with pytest.raises(ConfigError, match="transactional_producer"):
        client.transactions(object())


def test_a_plain_consumer_is_one_level(kit: Any) -> None:
    """Without priority levels the client is one level, 0, holding every topic."""
    client, _ = subscribed(kit, [1])
    levels = client.levels  # as the executor asks
    assert levels.reserved == {0: 1}
    assert levels.level_of(kit.topic) == 0
