"""Exactly-once on a fake consumer and an in-memory transactional producer: what each
transaction holds, aborts and rewinds, fatal errors, outputs of handlers."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from kafka.structs import TopicPartition

from priority_kafka import HandlerError, Output, ShardedExecutor, TransactionError
from priority_kafka._workers import OutputBuffer, outputs_of
from priority_kafka.commit_plan import CommitPlan
from priority_kafka.offset_map import decode_offset_map
from tests.fakes import FakeConsumer, FakeTransactions, RefusedMembership
from tests.test_executor_unit import running, wait_for

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def keyed(count, keys=7):
    return [(str(i % keys).encode(), str(i).encode()) for i in range(count)]


def transform(record):
    return Output("out", value=record.value, key=record.key)


def once_at(offset, act, handled=None):
    """A handler of outputs (:func:`transform`) that calls ``act()`` the first time it meets
    the record at ``offset``, counting handlings in ``handled`` if given."""
    met = threading.Event()

    def handle(record):
        if handled is not None:
            handled[record.offset] += 1
        if record.offset == offset and not met.is_set():
            met.set()
            act()
        return transform(record)

    return handle


def test_each_output_is_committed_with_the_offsets_that_cover_its_record():
    """Outputs come in the transaction whose commit first covers their record, once each."""
    consumer = FakeConsumer({TP0: keyed(60), TP1: [(k, b"one:" + v) for k, v in keyed(40)]})
    consumer.subscribe(["t"])
    producer = FakeTransactions(consumer)
    executor = ShardedExecutor(consumer, transform, shards=4, commit_interval_ms=0,
                               transactional_producer=producer)
    with running(executor) as errors:
        wait_for(lambda: consumer.stored.get(TP0) is not None
                 and consumer.stored[TP0].offset == 60
                 and consumer.stored.get(TP1) is not None and consumer.stored[TP1].offset == 40,
                 30)
    assert not errors and producer.initialised
    values = Counter(output.value for output in producer.outputs())
    assert set(values) == {str(i).encode() for i in range(60)} | {
        f"one:{i}".encode() for i in range(40)
    }
    assert max(values.values()) == 1
    # Each transaction's outputs of TP0 are records its commit covers and the last did not.
    last = CommitPlan(0)
    for outputs, offsets in producer.committed:
        if TP0 not in offsets:
            continue
        meta = offsets[TP0]
        plan = CommitPlan(meta.offset, "", decode_offset_map(meta.metadata, meta.offset).map.ranges)
        assert all(not last.covers(int(o.value)) and plan.covers(int(o.value))
                   for o in outputs if not o.value.startswith(b"one:"))
        last = plan
    assert executor.stats().transactions == len(producer.committed)
    assert executor.stats().outputs == 100


def test_a_failed_transaction_is_aborted_and_its_records_handled_again():
    """The aborted transaction's outputs are made again and committed once; its partitions
    resume from their last commit."""
    consumer = FakeConsumer({TP0: keyed(200)})
    consumer.subscribe(["t"])
    producer = FakeTransactions(consumer)
    handled = Counter()

    def fail_next():
        producer.fail_next = True

    executor = ShardedExecutor(consumer, once_at(120, fail_next, handled), shards=4,
                               commit_interval_ms=0, transactional_producer=producer)
    with running(executor) as errors:
        wait_for(lambda: TP0 in consumer.stored and consumer.stored[TP0].offset == 200, 30)
    assert not errors
    assert producer.aborted == 1 and executor.stats().aborted_transactions == 1
    assert max(handled.values()) == 2  # the rewound records came again
    values = Counter(output.value for output in producer.outputs())
    assert set(values) == {str(i).encode() for i in range(200)} and max(values.values()) == 1


def test_a_producer_that_cannot_abort_stops_the_executor_with_a_transaction_error():
    """Fenced (the abort fails too): run() raises TransactionError, nothing more commits."""
    consumer = FakeConsumer({TP0: keyed(100)})
    consumer.subscribe(["t"])
    producer = FakeTransactions(consumer)
    producer.fail_next = producer.fatal = True
    executor = ShardedExecutor(consumer, transform, shards=2, commit_interval_ms=0,
                               transactional_producer=producer)
    with pytest.raises(TransactionError, match="cannot go on"):
        executor.run()
    assert producer.committed == []


def test_a_handler_returning_something_else_fails_its_record():
    """Under exactly-once a return value that is no Output is the handler's failure."""
    consumer = FakeConsumer({TP0: keyed(5)})
    consumer.subscribe(["t"])
    executor = ShardedExecutor(consumer, lambda record: b"not an output", shards=1,
                               max_attempts=1, transactional_producer=FakeTransactions(consumer))
    with pytest.raises(HandlerError, match="returns None, an Output or a list of Outputs"):
        executor.run()


def test_dead_letters_go_into_the_transaction():
    """A record that fails for good under 'dead_letter' is committed with its dead letter."""
    consumer = FakeConsumer({TP0: keyed(10)})
    consumer.subscribe(["t"])
    producer = FakeTransactions(consumer)

    def handle(record):
        if record.offset == 4:
            raise ValueError("bad")
        return transform(record)

    executor = ShardedExecutor(consumer, handle, shards=2, commit_interval_ms=0,
                               max_attempts=1, failure_policy="dead_letter",
                               dead_letter_topic="dlq", transactional_producer=producer)
    with running(executor) as errors:
        wait_for(lambda: TP0 in consumer.stored and consumer.stored[TP0].offset == 10, 30)
    assert not errors
    dead = [o for o in producer.outputs() if o.topic == "dlq"]
    assert len(dead) == 1 and dead[0].value == b"4"
    assert dict(dead[0].headers)["dead_letter.offset"] == b"4"


def test_a_stuck_record_holds_back_only_its_own_output():
    """Records finished above a stuck one are committed (in the map) with their outputs;
    the stuck record's output comes once it finishes."""
    consumer = FakeConsumer({TP0: keyed(30)})
    consumer.subscribe(["t"])
    producer = FakeTransactions(consumer)
    release = threading.Event()

    def handle(record):
        if record.offset == 2:
            release.wait(20)
        return transform(record)

    executor = ShardedExecutor(consumer, handle, shards=4, commit_interval_ms=0,
                               transactional_producer=producer)
    with running(executor) as errors:
        try:
            # Key 2's records (2, 9, 16, 23) wait; the other 26 are committed with the map.
            wait_for(lambda: len(producer.outputs()) == 26, 30)
            assert consumer.stored[TP0].offset == 2
        finally:
            release.set()
        wait_for(lambda: consumer.stored[TP0].offset == 30, 30)
    assert not errors
    values = Counter(output.value for output in producer.outputs())
    assert len(values) == 30 and max(values.values()) == 1


@pytest.mark.parametrize(("result", "expected"), [
    (None, ()),
    (Output("o", b"v"), (Output("o", b"v"),)),
    ([Output("o", b"1"), Output("p", b"2")], (Output("o", b"1"), Output("p", b"2"))),
])
def test_outputs_of_a_handler_result(result, expected):
    """None, one Output or an iterable of them."""
    assert outputs_of(result) == expected


@pytest.mark.parametrize("result", [b"v", "text", {"topic": "o"}, [Output("o"), 5]])
def test_anything_else_is_refused_naming_its_type(result):
    with pytest.raises(TypeError, match="under exactly-once a handler returns"):
        outputs_of(result)


def test_a_late_store_of_a_committed_record_is_dropped_not_taken_again():
    """A worker finishing a record after it was handed out again and committed (revoke,
    rewind) stores its outputs once more: they are dropped, never produced twice."""
    buffer = OutputBuffer()
    buffer.keep(TP0, 5, (Output("o", b"5"),))
    first = CommitPlan(6)
    assert [o.value for o in buffer.take(TP0, first, None)] == [b"5"]
    buffer.keep(TP0, 5, (Output("o", b"5"),))  # the stale worker
    assert buffer.take(TP0, CommitPlan(8), first) == []
    assert buffer.records() == 0


def test_an_output_needs_a_topic():
    with pytest.raises(TypeError, match="'topic' must be a topic name"):
        Output("")


def test_a_revoke_commits_the_revoked_partitions_outputs_in_a_transaction():
    """The rebalance hook commits what is done of a revoked partition, with its outputs, before
    the partition moves (the periodic commit is a minute away)."""
    consumer = FakeConsumer({TP0: keyed(20), TP1: [(k, b"one:" + v) for k, v in keyed(20)]})
    consumer.subscribe(["t"])
    producer = FakeTransactions(consumer)
    handled = []
    executor = ShardedExecutor(consumer, lambda r: (handled.append(r), transform(r))[1],
                               shards=2, commit_interval_ms=60_000,
                               transactional_producer=producer)
    executor.subscribe(["t"])
    with running(executor) as errors:
        wait_for(lambda: len(handled) == 40, 30)
        consumer.revoke({TP1})
        wait_for(lambda: any(TP1 in offsets for _, offsets in producer.committed), 30)
    assert not errors
    (outputs, offsets), *_ = [(o, f) for o, f in producer.committed if TP1 in f]
    assert offsets[TP1].offset == 20
    assert {o.value for o in outputs} >= {b"one:%d" % i for i in range(20)}


def test_an_async_handlers_outputs_are_committed_too():
    """An ``async def`` handler returns its outputs the same way."""
    consumer = FakeConsumer({TP0: keyed(30)})
    consumer.subscribe(["t"])
    producer = FakeTransactions(consumer)

    async def handle(record):
        return [transform(record), Output("audit", value=record.value)]

    executor = ShardedExecutor(consumer, handle, shards=2, commit_interval_ms=0,
                               transactional_producer=producer)
    with running(executor) as errors:
        wait_for(lambda: TP0 in consumer.stored and consumer.stored[TP0].offset == 30, 30)
    assert not errors
    topics = Counter(output.topic for output in producer.outputs())
    assert topics == {"out": 30, "audit": 30}


def test_a_fenced_producer_from_a_factory_is_replaced_and_the_executor_goes_on():
    """Given a factory, a producer that cannot go on (the commit and the abort fail: fenced)
    is closed and a new one from the factory takes over; the rewound records' outputs are
    committed once, by the new producer."""
    consumer = FakeConsumer({TP0: keyed(200)})
    consumer.subscribe(["t"])
    built = []
    fenced = threading.Event()

    def factory():
        built.append(FakeTransactions(consumer))
        return built[-1]

    def handle(record):
        if record.offset == 120 and not fenced.is_set():
            fenced.set()
            built[0].fail_next = built[0].fatal = True
        return transform(record)

    executor = ShardedExecutor(consumer, handle, shards=4, commit_interval_ms=0,
                               transactional_producer=factory)
    with running(executor) as errors:
        wait_for(lambda: TP0 in consumer.stored and consumer.stored[TP0].offset == 200, 30)
    assert not errors and len(built) == 2
    assert built[0].closed and built[0].owned and built[1].initialised and built[1].committed
    assert built[1].closed  # closed with the executor: it built it
    assert executor.stats().renewed_producers == 1
    values = Counter(output.value for producer in built for output in producer.outputs())
    assert set(values) == {str(i).encode() for i in range(200)} and max(values.values()) == 1


def test_producers_fenced_again_and_again_stop_the_executor():
    """Each new producer fenced before it commits (another live process with the same
    transactional id fences it back): after MAX_RENEWALS the executor stops, saying why."""
    from priority_kafka.executor._transactions import MAX_RENEWALS

    consumer = FakeConsumer({TP0: keyed(100)})
    consumer.subscribe(["t"])
    built = []

    def factory():
        built.append(FakeTransactions(consumer))
        built[-1].fail_next = built[-1].fatal = True
        return built[-1]

    executor = ShardedExecutor(consumer, transform, shards=2, commit_interval_ms=0,
                               transactional_producer=factory)
    with pytest.raises(TransactionError, match="same transactional id"):
        executor.run()
    assert len(built) == MAX_RENEWALS + 1 and all(producer.closed for producer in built)
    assert all(producer.committed == [] for producer in built)


def test_a_factory_that_fails_stops_the_executor_at_start():
    """What the factory raises (or a producer of the wrong kind) is the executor's error."""
    consumer = FakeConsumer({TP0: keyed(10)})
    consumer.subscribe(["t"])

    def factory():
        raise ValueError("no brokers today")

    executor = ShardedExecutor(consumer, transform, shards=2, transactional_producer=factory)
    with pytest.raises(TransactionError, match="no brokers today"):
        executor.run()


@pytest.mark.parametrize("refusal", [RefusedMembership("unknown member"), RuntimeError("other")])
def test_offsets_refused_for_a_stale_membership_make_the_member_rejoin_at_once(refusal):
    """send_offsets_to_transaction refused: the consumer is asked whether the group refused
    the membership (its member then rejoins at once, counted in ``membership_rejoins``); the
    transaction is aborted and its records handled again either way."""
    consumer = FakeConsumer({TP0: keyed(100)})
    consumer.subscribe(["t"])
    producer = FakeTransactions(consumer)

    def refuse():
        producer.refuse_offsets = refusal

    executor = ShardedExecutor(consumer, once_at(50, refuse), shards=2, commit_interval_ms=0,
                               transactional_producer=producer)
    with running(executor) as errors:
        wait_for(lambda: consumer.stored.get(TP0) is not None
                 and consumer.stored[TP0].offset == 100, 30)
    assert not errors
    assert [error for error, _ in consumer.rejoins] == [refusal]
    assert set(consumer.rejoins[0][1]) == {TP0}
    stats = executor.stats()
    assert stats.membership_rejoins == (1 if isinstance(refusal, RefusedMembership) else 0)
    assert stats.aborted_transactions == 1
    assert Counter(o.value for o in producer.outputs()) == Counter(
        str(i).encode() for i in range(100))
