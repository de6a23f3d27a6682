"""ConfluentClient's pausing and waiting, against a scripted confluent consumer (no broker).

librdkafka's ``pause()`` drops the partition's prefetched messages and fetches again only when
its broker thread next wakes (up to about a second): an executor pausing a busy partition every
few hundred records idled (0.6 of kafka-python's rate at 8 shards in benchmarks.executor_seed).
The adapter therefore parks a paused partition's records and pauses it in librdkafka only once
``park_bytes`` are parked; these tests pin that down.
"""

from __future__ import annotations

import time
from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentPartition

from priority_kafka.confluent._client import REFETCH_AFTER_S
from priority_kafka.confluent.executor import ConfluentClient
from priority_kafka.kafka_python._kafka import TopicPartition

A, B = TopicPartition("a", 0), TopicPartition("b", 0)


class _Message:
    """What ``Consumer.consume`` returns, as far as the adapter reads it."""

    def __init__(self, tp: TopicPartition, offset: int, value: bytes = b"v" * 10) -> None:
        self._tp, self._offset, self._value = tp, offset, value

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._tp.topic

    def partition(self) -> int:
        return self._tp.partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> None:
        return None

    def value(self) -> bytes:
        return self._value

    def headers(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)


class _Error(_Message):
    """An error event among the messages."""

    def __init__(self, code: int, reason: str | None = None) -> None:
        super().__init__(A, -1)
        self._code, self._reason = code, reason

    def error(self) -> KafkaError:  # type: ignore[override]
        return KafkaError(self._code) if self._reason is None else KafkaError(
            self._code, self._reason)


class _Consumer:
    """Hands out queued messages in order (none of a partition paused in it), and records the
    calls the adapter makes."""

    def __init__(self) -> None:
        self.queue: deque[_Message] = deque()
        self.calls: list[tuple[str, Any]] = []
        self.paused: set[tuple[str, int]] = set()
        #: The offset after the last message handed out, per partition (librdkafka's position).
        self.positions: dict[tuple[str, int], int] = {}
        #: What ``committed()`` answers per partition.
        self.commits: dict[tuple[str, int], Any] = {}

    def add(self, tp: TopicPartition, offsets: range) -> None:
        self.queue.extend(_Message(tp, offset) for offset in offsets)

    def consume(self, num_messages: int, timeout: float) -> list[_Message]:
        self.calls.append(("consume", (num_messages, timeout)))
        taken: list[_Message] = []
        for message in list(self.queue):
            if len(taken) == num_messages:
                break
            if (message.topic(), message.partition()) not in self.paused:
                self.queue.remove(message)
                taken.append(message)
                self.positions[(message.topic(), message.partition())] = message.offset() + 1
        return taken

    def position(self, partitions: list[ConfluentPartition]) -> list[ConfluentPartition]:
        return [ConfluentPartition(tp.topic, tp.partition,
                                   self.positions.get((tp.topic, tp.partition), -1001))
                for tp in partitions]

    def seek(self, partition: ConfluentPartition) -> None:
        self.calls.append(("seek", (partition.topic, partition.offset)))

    def pause(self, partitions: list[ConfluentPartition]) -> None:
        self.calls.append(("pause", sorted(tp.topic for tp in partitions)))
        self.paused.update((tp.topic, tp.partition) for tp in partitions)

    def resume(self, partitions: list[ConfluentPartition]) -> None:
        self.calls.append(("resume", sorted(tp.topic for tp in partitions)))
        self.paused.difference_update((tp.topic, tp.partition) for tp in partitions)


    def committed(self, partitions: list[ConfluentPartition],
                  timeout: float) -> list[Any]:
        """What librdkafka answers for a commit read: per partition, an offset or an error."""
        self.calls.append(("committed", timeout))
        return [self.commits[(tp.topic, tp.partition)] for tp in partitions]


def _offsets(batch: dict[TopicPartition, list[Any]]) -> dict[str, list[int]]:
    return {tp.topic: [record.offset for record in records] for tp, records in batch.items()}


def _librdkafka_pauses(consumer: _Consumer) -> list[tuple[str, Any]]:
    return [call for call in consumer.calls if call[0] in ("pause", "resume")]


def test_a_short_pause_parks_records_and_never_pauses_librdkafka() -> None:
    """A paused partition's records are held back, in order, and come first after resume; the
    other partition flows meanwhile; librdkafka is never paused (its prefetch survives)."""
    fake = _Consumer()
    adapter = ConfluentClient(fake, max_poll_records=5)
    fake.add(A, range(0, 2))
    assert _offsets(adapter.poll(100)) == {"a": [0, 1]}
    adapter.pause(A)
    assert adapter.paused() == {A}
    fake.add(A, range(2, 5))
    fake.add(B, range(0, 2))
    assert _offsets(adapter.poll(10)) == {"b": [0, 1]}
    assert adapter.parked() == 3
    assert adapter.poll(0) == {}
    adapter.resume(A)
    fake.add(A, range(5, 8))
    assert _offsets(adapter.poll(100)) == {"a": [2, 3, 4, 5, 6]}  # parked first, budget 5
    assert _offsets(adapter.poll(100)) == {"a": [7]}
    assert adapter.parked() == 0
    assert _librdkafka_pauses(fake) == []


def test_runs_of_partitions_interleaved_in_one_consume_keep_each_partitions_order() -> None:
    """The poll looks a partition up once per run of its messages: runs that alternate (a, b,
    a, a paused c, a) still group every record under its partition in offset order, and a
    paused partition's run is parked with its bytes counted, whatever run came before it."""
    fake = _Consumer()
    adapter = ConfluentClient(fake, max_poll_records=20)
    c = TopicPartition("c", 0)
    adapter.pause(c)
    for tp, offsets in ((A, range(0, 2)), (B, range(0, 3)), (A, range(2, 3)), (c, range(0, 2)),
                        (A, range(3, 5)), (c, range(2, 3)), (B, range(3, 4))):
        fake.add(tp, offsets)
    assert _offsets(adapter.poll(0)) == {"a": [0, 1, 2, 3, 4], "b": [0, 1, 2, 3]}
    assert adapter.parked() == 3
    adapter.resume(c)
    assert _offsets(adapter.poll(0)) == {"c": [0, 1, 2]}
    assert adapter.parked() == 0


def test_a_partition_with_park_bytes_parked_is_paused_in_librdkafka_until_resumed() -> None:
    """Parking is bounded: at ``park_bytes`` the partition is paused in librdkafka too, and
    resumed with the executor; the parked records come first, then the rest in order."""
    fake = _Consumer()
    adapter = ConfluentClient(fake, max_poll_records=4, park_bytes=30)  # 3 records of 10 B
    adapter.pause(A)
    fake.add(A, range(0, 10))
    assert adapter.poll(10) == {}
    assert _librdkafka_pauses(fake) == [("pause", ["a"])]
    assert adapter.parked() == 4  # one poll's worth past the bound, not more
    assert adapter.poll(10) == {}
    assert adapter.parked() == 4
    fake.add(A, range(10, 12))
    adapter.resume(A)
    assert fake.calls[-1] == ("resume", ["a"])
    assert [_offsets(adapter.poll(100)) for _ in range(3)] == [
        {"a": [0, 1, 2, 3]}, {"a": [4, 5, 6, 7]}, {"a": [8, 9, 10, 11]}
    ]
    # librdkafka returned its messages at once: nothing to restart, now or later.
    time.sleep(REFETCH_AFTER_S * 1.5)
    assert adapter.poll(0) == {}
    assert not [call for call in fake.calls if call[0] == "seek"]


def test_a_resumed_partition_librdkafka_returns_nothing_of_is_sought_to_its_position() -> None:
    """A partition resumed in librdkafka whose fetch librdkafka postponed (its back-off after a
    large prefetch) returns nothing: once REFETCH_AFTER_S passed, the next poll seeks it to
    where it stands (after the last record it returned), so it is fetched now; once only."""
    fake = _Consumer()
    adapter = ConfluentClient(fake, max_poll_records=4, park_bytes=30)
    adapter.pause(A)
    fake.add(A, range(0, 4))
    assert adapter.poll(10) == {}
    assert _librdkafka_pauses(fake) == [("pause", ["a"])]
    adapter.resume(A)  # librdkafka has nothing more of it: the fake's queue is empty
    assert _offsets(adapter.poll(0)) == {"a": [0, 1, 2, 3]}
    assert adapter.poll(0) == {} and fake.calls[-1][0] == "consume"  # not late yet
    time.sleep(REFETCH_AFTER_S * 1.5)
    assert adapter.poll(0) == {}
    assert [call for call in fake.calls if call[0] == "seek"] == [("seek", ("a", 4))]
    time.sleep(REFETCH_AFTER_S * 1.5)
    assert adapter.poll(0) == {}
    assert len([call for call in fake.calls if call[0] == "seek"]) == 1


def test_revoked_and_sought_partitions_lose_their_parked_records() -> None:
    """Records parked for a partition that is revoked or sought are never returned."""
    fake = _Consumer()
    adapter = ConfluentClient(fake)
    adapter.pause(A, B)
    fake.add(A, range(0, 3))
    fake.add(B, range(0, 3))
    assert adapter.poll(10) == {}
    adapter._forget({A})  # what the on_revoke / on_lost hooks do
    adapter.seek(B, 7)
    adapter.resume(A, B)
    assert adapter.poll(0) == {}
    assert adapter.parked() == 0


def test_messages_collected_before_a_revoke_in_the_same_poll_are_not_returned() -> None:
    """librdkafka's order within consume(): messages collected, then a rebalance callback
    served (the revoke hook forgets the partition), then the collected messages returned.
    Those of the revoked partition, from that call and from earlier calls of the same poll,
    are dropped; what later calls return of it (assigned again, fetched anew) is kept."""
    fake = _Consumer()
    adapter = ConfluentClient(fake, max_poll_records=500)
    consume = fake.consume
    revoke_in: list[int] = [2]  # the second consume() call serves the revoke of A

    def consuming(num_messages: int, timeout: float) -> list[_Message]:
        taken = consume(num_messages, timeout)
        revoke_in[0] -= 1
        if revoke_in[0] == 0:
            adapter._forget({A})  # what the on_revoke / on_lost hooks do, inside consume()
        return taken

    fake.consume = consuming  # type: ignore[method-assign]
    fake.add(A, range(0, 1))  # the first call of the poll: consume(500, 0) takes it
    assert _offsets(adapter.poll(0)) == {"a": [0]}
    fake.add(A, range(1, 4))
    fake.add(B, range(0, 2))
    assert _offsets(adapter.poll(0)) == {"b": [0, 1]}  # A's 1-3 came with its revoke
    fake.add(A, range(0, 2))  # assigned again: fetched anew from its commit
    assert _offsets(adapter.poll(0)) == {"a": [0, 1]}


def test_a_partition_revoked_and_assigned_again_in_one_call_keeps_what_it_fetched_anew() -> None:
    """A consume() that waits may serve a revoke, the assignment after it and the first fetch
    from the commit: librdkafka's barrier purged the old messages of that call, so what it
    returns is kept (dropped, it would be skipped); those of earlier calls are not."""
    fake = _Consumer()
    adapter = ConfluentClient(fake, max_poll_records=500)
    assigned_again = adapter._hook(lambda partitions: None, forget=False)
    consume = fake.consume

    def consuming(num_messages: int, timeout: float) -> list[_Message]:
        if timeout > 0:  # the waiting call: revoke, assignment, a fetch from the commit
            adapter._forget({A})
            assigned_again(fake, [ConfluentPartition("a", 0)])
            fake.add(A, range(5, 6))
        return consume(num_messages, timeout)

    fake.consume = consuming  # type: ignore[method-assign]
    assert _offsets(adapter.poll(100)) == {"a": [5]}


def test_poll_returns_as_soon_as_one_message_is_there() -> None:
    """``consume(n, timeout)`` waits for ``n`` messages; the adapter waits for the first only
    (``consume(1, timeout)``), then takes what else is there without waiting."""
    fake = _Consumer()
    adapter = ConfluentClient(fake, max_poll_records=500)
    assert adapter.poll(100) == {}
    assert fake.calls == [("consume", (500, 0)), ("consume", (1, 0.1))]
    fake.calls.clear()
    fake.add(A, range(3))
    assert _offsets(adapter.poll(100)) == {"a": [0, 1, 2]}
    assert fake.calls == [("consume", (500, 0))]


def test_parked_bytes_follow_a_partial_unpark() -> None:
    """Records left parked after a short poll still count towards ``park_bytes``."""
    fake = _Consumer()
    adapter = ConfluentClient(fake, max_poll_records=2, park_bytes=40)  # 4 records of 10 B
    adapter.pause(A)
    fake.add(A, range(0, 2))
    fake.add(A, range(2, 4))
    assert adapter.poll(10) == {} and adapter.poll(10) == {}
    assert _librdkafka_pauses(fake) == [("pause", ["a"])]  # 4 parked: 40 B
    adapter.resume(A)
    assert _offsets(adapter.poll(100)) == {"a": [0, 1]}
    adapter.pause(A)
    fake.add(A, range(4, 5))
    assert adapter.poll(10) == {}
    assert _librdkafka_pauses(fake)[1:] == [("resume", ["a"])]  # 3 parked: 30 B, not held
    fake.add(A, range(5, 6))
    assert adapter.poll(10) == {}
    assert _librdkafka_pauses(fake)[2:] == [("pause", ["a"])]  # 4 parked again


def test_an_error_event_is_raised_by_the_next_poll_after_the_records_around_it() -> None:
    """An error the consumer cannot get past does not cost the records consumed with it
    (librdkafka has moved past them): they are returned, and the next poll raises; a partition
    EOF is skipped."""
    fake = _Consumer()
    adapter = ConfluentClient(fake)
    fake.add(A, range(0, 1))
    fake.queue.append(_Error(KafkaError._PARTITION_EOF))
    fake.queue.append(_Error(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    fake.add(A, range(1, 2))
    assert _offsets(adapter.poll(100)) == {"a": [0, 1]}
    with pytest.raises(KafkaException):
        adapter.poll(100)
    fake.add(A, range(2, 3))
    assert _offsets(adapter.poll(100)) == {"a": [2]}


@pytest.mark.parametrize(
    "code", [KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN]
)
def test_an_error_librdkafka_recovers_from_is_logged_not_raised(
    code: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A subscribed topic that does not exist yet or a broker down: librdkafka goes on by
    itself, so the executor does too, with a warning naming the error."""
    fake = _Consumer()
    adapter = ConfluentClient(fake)
    fake.queue.append(_Error(code))
    fake.add(A, range(0, 2))
    assert _offsets(adapter.poll(100)) == {"a": [0, 1]}
    fake.add(A, range(2, 3))
    assert _offsets(adapter.poll(100)) == {"a": [2]}
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert KafkaError(code).str() in caplog.records[0].getMessage()


def test_a_commit_the_coordinator_could_not_read_is_an_error_not_a_missing_commit() -> None:
    """A partition librdkafka answers with an error for is named in KafkaException: taken for
    "never committed", its finished records would run again (under exactly-once, their
    outputs twice)."""
    fake = _Consumer()
    # confluent's TopicPartition takes no error from Python: a stand-in with its attributes.
    fake.commits[("a", 0)] = SimpleNamespace(topic="a", partition=0, offset=7, metadata="m",
                                             error=None)
    fake.commits[("b", 0)] = SimpleNamespace(topic="b", partition=0, offset=-1001,
                                             metadata=None, error=None)
    adapter = ConfluentClient(fake)
    assert adapter.fetch_committed([A, B]) == {A: (7, "m", -1)}
    fake.commits[("b", 0)].error = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    with pytest.raises(KafkaException, match=r"could not read the commits of b\[0\]: "):
        adapter.fetch_committed([A, B])


#: librdkafka's event for a read of the assigned partitions' commits that failed as a whole.
_UNRETRIED = ('Failed to fetch committed offsets for 0 partition(s) in group "orders-g-1": '
              'Broker: Not coordinator')


class _Levels(_Consumer):
    """A PriorityConsumer as far as the adapter renews its levels."""

    def __init__(self) -> None:
        super().__init__()
        self.renewed: list[tuple[int, str]] = []

    def renew_level(self, level: int, reason: str) -> None:
        self.renewed.append((level, reason))


def test_a_commit_read_librdkafka_never_retries_renews_the_level_or_stops() -> None:
    """librdkafka issue #5586: when the read of the assigned partitions' commits fails as a
    whole (NOT_COORDINATOR, no partitions), librdkafka never asks again and never fetches
    them. A PriorityConsumer's level is renewed (its group named in the event); a plain
    Consumer stops the executor with the error instead of a silent stall. A read that failed
    for some partitions (librdkafka retries those) is only logged."""
    levels = _Levels()
    adapter = ConfluentClient(levels)
    levels.queue.append(_Error(KafkaError.NOT_COORDINATOR, _UNRETRIED))
    levels.queue.append(_Error(KafkaError.NOT_COORDINATOR, _UNRETRIED.replace(" 0 ", " 2 ")))
    levels.add(A, range(0, 2))
    assert _offsets(adapter.poll(100)) == {"a": [0, 1]}
    [(level, reason)] = levels.renewed
    assert level == 1 and "issue #5586" in reason and "'orders-g-1'" in reason
    levels.add(A, range(2, 3))
    assert _offsets(adapter.poll(100)) == {"a": [2]}
    plain = _Consumer()
    adapter = ConfluentClient(plain)
    plain.queue.append(_Error(KafkaError.NOT_COORDINATOR, _UNRETRIED))
    plain.add(A, range(0, 1))
    assert _offsets(adapter.poll(100)) == {"a": [0]}
    with pytest.raises(KafkaException, match=r"issue #5586.*recreate the consumer"):
        adapter.poll(100)
