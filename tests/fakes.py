"""In-process stand-ins for kafka-python consumers, for unit tests of pure logic.

Real-broker tests cover every consumer feature; these fakes make the per-poll arithmetic and the
bookkeeping testable without one.
"""

from __future__ import annotations

import asyncio

from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.future import Future

from priority_kafka._types import ONE_LEVEL, Answered
from priority_kafka.errors import ConfigError, DeserializationError
from priority_kafka.kafka_python._dead_letters import kafka_dead_letters


def record(topic, offset, value=b"v"):
    return ConsumerRecord(topic, 0, -1, offset, 0, 0, None, value, [], None, -1, len(value), -1)


def fake_cluster_topics():
    """The topics a fake cluster lists (PriorityConsumer's topic_lister): the levels of the
    logical topics "orders" and "a" the unit tests subscribe to with max_priority=3."""
    return {f"{t}-{level}" for t in ("orders", "a") for level in range(3)}


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
        self.paused_partitions = set()
        self.closed = False
        self.values = {}  # offset -> value, where not b"v"

    def subscribe(self, topics=(), pattern=None, listener=None):
        self.topic = topics[0]
        self.assigned = {TopicPartition(self.topic, 0)}
        self.listener = listener

    def subscription(self):
        return {self.topic}

    def assign(self, partitions):
        self.assigned = set(partitions)
        self.topic = next(iter(self.assigned)).topic

    def unsubscribe(self):
        self.assigned = set()

    def assignment(self):
        return set(self.assigned)

    def poll(self, timeout_ms=0, max_records=None, update_offsets=True):
        self.calls.append(("poll", timeout_ms, max_records))
        if self.fail_next_poll is not None:
            error, self.fail_next_poll = self.fail_next_poll, None
            raise error
        count = min(max_records, self.backlog - self.position)
        if count <= 0 or self.paused_partitions:
            return {}
        batch = [
            record(self.topic, offset, self.values.get(offset, b"v"))
            for offset in range(self.position, self.position + count)
        ]
        self.position += count
        return {TopicPartition(self.topic, 0): batch}

    def commit(self, offsets=None, timeout_ms=None):
        self.calls.append(("commit", offsets))

    def commit_async(self, offsets=None, callback=None):
        self.calls.append(("commit_async", offsets))
        return Future().success(None)

    def pause(self, *partitions):
        self.paused_partitions.update(partitions)

    def resume(self, *partitions):
        self.paused_partitions.difference_update(partitions)

    def paused(self):
        return set(self.paused_partitions)

    def seek(self, tp, offset):
        self.calls.append(("seek", tp, offset))
        self.position = offset

    def close(self, autocommit=True, timeout_ms=None):
        self.closed = True

    def metrics(self, raw=False):
        return {}

    def join(self):
        """What kafka-python does inside poll() once the group settled: tell the listener."""
        asyncio.run(self.listener.on_partitions_assigned(self.assignment()))

    def rebalance(self):
        """A rebalance starts: kafka-python revokes everything through the listener."""
        asyncio.run(self.listener.on_partitions_revoked(self.assignment()))


class FakeConsumer:
    """Stands in for the executor's client over a KafkaConsumer with every partition assigned:
    serves in-memory records. Dead letters go the kafka-python client's way.

    ``records`` maps each TopicPartition to the values it holds (offset = index). ``poll``
    returns up to ``max_poll_records`` of the unpaused partitions, round robin; commits are
    logged in ``commits``. ``revoke(partitions)`` plays a rebalance through the listener, as
    kafka-python does inside ``poll()``.
    """

    levels = ONE_LEVEL  # a KafkaConsumer's: one level

    def __init__(self, records, max_poll_records=10, bootstrap_servers=None):
        self.records = {tp: list(values) for tp, values in records.items()}
        self.positions = dict.fromkeys(self.records, 0)
        self.max_poll_records = max_poll_records
        self.paused_partitions = set()
        self.assigned = set(self.records)
        self.listener = None
        self.topics = None
        self.commits = []
        self.stored = {}  # the last OffsetAndMetadata committed per partition, as the broker
        self.closed = False
        self.pending_revoke = None
        self.undeserializable = set()  # (partition, offset) whose value "cannot be read"
        self.bootstrap_servers = bootstrap_servers
        self.rejoins = []  # (error, offsets) of each rejoin_refused call

    def subscribe(self, topics=(), pattern=None, listener=None):
        self.topics = set(topics)
        self.listener = listener

    def subscription(self):
        return self.topics

    def assignment(self):
        return set(self.assigned)

    def poll(self, timeout_ms=0, max_records=None):
        if self.pending_revoke is not None:
            revoked, self.pending_revoke = self.pending_revoke, None
            asyncio.run(self.listener.on_partitions_revoked(revoked))
            self.assigned -= revoked
            asyncio.run(self.listener.on_partitions_assigned(set(self.assigned)))
        batch = {}
        budget = max_records or self.max_poll_records
        for tp in sorted(self.assigned - self.paused_partitions):
            start = self.positions[tp]
            values = self.records[tp][start : start + budget]
            bad = sorted(o for p, o in self.undeserializable if p == tp and o >= start)
            if bad and bad[0] < start + len(values):
                if bad[0] == start and not batch:  # as PriorityConsumer: raise at the first
                    raise self._undeserializable(tp, start)
                values = values[: bad[0] - start]
            if values:
                batch[tp] = [
                    ConsumerRecord(tp.topic, tp.partition, -1, start + i, 0, 0, key, value,
                                   [], None, -1, -1, -1)
                    for i, (key, value) in enumerate(values)
                ]
                self.positions[tp] += len(values)
                budget -= len(values)
        return batch

    def _undeserializable(self, tp, offset):
        key, value = self.records[tp][offset]
        record = ConsumerRecord(tp.topic, tp.partition, -1, offset, 0, 0, key, value, [], None,
                                -1, -1, -1)
        return DeserializationError(
            topic=tp.topic, partition=tp.partition, offset=offset, key=key, value=value,
            headers=[], error=ValueError("cannot read"), record=record,
        )

    def revoke(self, partitions):
        """The next poll revokes ``partitions`` (and assigns the rest again)."""
        self.pending_revoke = set(partitions)

    def pause(self, *partitions):
        self.paused_partitions.update(partitions)

    def resume(self, *partitions):
        self.paused_partitions.difference_update(partitions)

    def paused(self):
        return set(self.paused_partitions)

    def seek(self, partition, offset):
        self.positions[partition] = offset

    def commit(self, offsets):
        self.commits.append({tp: meta.offset for tp, meta in offsets.items()})
        self.stored.update(offsets)

    def commit_async(self, offsets):
        self.commit(offsets)
        return Future().success(None)

    def commit_in_background(self, offsets):
        # Answered at once, as a synchronous commit (confluent's ConfluentClient does so too).
        try:
            self.commit(offsets)
        except Exception as exc:
            return Answered(exc)
        return Answered()

    def fetch_committed(self, partitions):
        return {tp: self.stored[tp] for tp in partitions if tp in self.stored}

    def close(self):
        self.closed = True

    def transactions(self, producer, owned=False):
        # Checked as the adapters check theirs (tests/contract): only its own kind.
        if not isinstance(producer, FakeTransactions):
            raise ConfigError(
                f"'transactional_producer' must be a FakeTransactions (got {producer!r})."
            )
        producer.owned = owned
        return producer

    def transaction_groups(self, offsets):
        return [("group-metadata", dict(offsets))]

    def rejoin_refused(self, error, offsets):
        self.rejoins.append((error, dict(offsets)))
        return isinstance(error, RefusedMembership)

    def dead_letter_producer(self, given):
        return kafka_dead_letters(given, self._connection)

    def _connection(self):
        if self.bootstrap_servers is None:
            raise ConfigError("pass 'dead_letter_producer': the fake has no bootstrap_servers.")
        return {"bootstrap_servers": self.bootstrap_servers}

    def committed_offsets(self):
        """The last committed offset of each partition."""
        last = {}
        for commit in self.commits:
            last.update(commit)
        return last


class RefusedMembership(Exception):
    """The fake group's refusal of a transaction's offsets (a member it no longer knows)."""


class FakeTransactions:
    """A transactional producer in memory: ``committed`` holds each committed transaction's
    outputs and offsets; ``fail_next`` makes the next commit fail (``fatal``: and the abort);
    ``refuse_offsets`` makes the next send_offsets raise it."""

    def __init__(self, consumer):
        self.consumer = consumer  # commits its offsets, as the broker would
        self.committed = []
        self.aborted = 0
        self.open = None
        self.fail_next = False
        self.fatal = False
        self.initialised = False
        self.owned = False
        self.closed = False
        self.refuse_offsets = None

    def init(self):
        self.initialised = True

    def begin(self):
        assert self.open is None, "a transaction is already open"
        self.open = ([], {})

    def send(self, output):
        self.open[0].append(output)

    def send_offsets(self, offsets, group_metadata):
        assert group_metadata == "group-metadata"
        refusal, self.refuse_offsets = self.refuse_offsets, None
        if refusal is not None:
            raise refusal
        self.open[1].update(offsets)

    def commit(self):
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("the transaction failed")
        outputs, offsets = self.open
        self.open = None
        self.committed.append((outputs, offsets))
        self.consumer.commits.append({tp: meta.offset for tp, meta in offsets.items()})
        self.consumer.stored.update(offsets)

    def abort(self):
        if self.fatal:
            raise RuntimeError("fenced")
        self.open = None
        self.aborted += 1

    def close(self):
        self.closed = True

    def outputs(self):
        return [output for outputs, _ in self.committed for output in outputs]
