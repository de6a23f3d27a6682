"""The executor's parts without a broker: ledger, pool, record handling, and the loop on a fake.

tests/test_executor.py runs every executor feature against the real broker; these pin down the
rules of each part quickly.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time

import pytest
from kafka.structs import OffsetAndMetadata, TopicPartition

from priority_kafka import ConfigError, ExecutorConfig, HandlerError, ShardedExecutor
from priority_kafka._workers import (
    DEAD_LETTER_HEADERS,
    Counters,
    ExecutorStats,
    Outcome,
    RecordHandler,
    WorkerPool,
    retry_delays,
)
from priority_kafka._workers._pool import MAX_BATCH  # the pool's own constant
from priority_kafka.errors import DeserializationError
from priority_kafka.executor._bytes import ReceivedBytes
from priority_kafka.executor._ledger import PartitionLedger
from priority_kafka.offset_map import decode_offset_map
from tests.fakes import FakeConsumer

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


class Rec:
    def __init__(self, offset, key=None, value=b"v", headers=()):
        self.offset, self.key, self.value, self.headers = offset, key, value, list(headers)


def receive(ledger, records, tp=TP0):
    """Receive ``records`` of ``tp``; the epoch and the records the ledger took."""
    received = ledger.receive({tp: records})
    if not received:
        return None, []
    ((got_tp, epoch, taken),) = received
    assert got_tp == tp
    return epoch, taken


# -- ledger -----------------------------------------------------------------------------------


def test_ledger_commits_only_below_the_lowest_record_not_done():
    """Out-of-order completions move the commit offset only over a finished prefix."""
    ledger = PartitionLedger(limit=100, resume_at=50, counters=Counters())
    epoch, _ = receive(ledger, [Rec(0), Rec(1), Rec(5)])
    assert ledger.committable() == {TP0: OffsetAndMetadata(0, "", -1)}  # never committed yet
    ledger.committed(ledger.committable())
    epoch.complete([1, 5])
    assert ledger.committable() == {}
    assert ledger.completed_ranges(TP0) == [(1, 6)]
    epoch.complete([0])
    assert ledger.committable() == {TP0: OffsetAndMetadata(6, "", -1)}
    ledger.committed(ledger.committable())
    assert ledger.committable() == {}


def test_ledger_skips_redeliveries_and_counts_them():
    """A record received again while tracked is not queued twice."""
    counters = Counters()
    ledger = PartitionLedger(limit=100, resume_at=50, counters=counters)
    receive(ledger, [Rec(0), Rec(1)])
    _, again = receive(ledger, [Rec(1), Rec(2)])
    assert [record.offset for record in again] == [2]
    assert receive(ledger, [Rec(0)]) == (None, [])
    assert counters.snapshot().skipped_redeliveries == 2


def test_ledger_pauses_at_the_limit_and_resumes_at_the_threshold():
    """Pause once `limit` records are in flight; resume at `resume_at` or fewer."""
    ledger = PartitionLedger(limit=3, resume_at=1, counters=Counters())
    epoch, _ = receive(ledger, [Rec(i) for i in range(3)])
    assert ledger.flow() == ([TP0], [])
    assert ledger.flow() == ([], [])
    epoch.complete([0])
    assert ledger.flow() == ([], [])
    epoch.complete([1])
    assert ledger.flow() == ([], [TP0])


def test_ledger_revoke_plans_commit_rewind_and_resume_then_forgets():
    """Revoke says what to commit and where to seek back; later completions change nothing."""
    ledger = PartitionLedger(limit=2, resume_at=0, counters=Counters())
    epoch, _ = receive(ledger, [Rec(0), Rec(1), Rec(2)])
    ledger.flow()  # paused
    epoch.complete([0])
    revoked = ledger.revoke({TP0})
    assert revoked.commit == {TP0: OffsetAndMetadata(1, "", -1)}
    assert revoked.rewind == {TP0: 1}
    assert revoked.paused == {TP0}
    assert ledger.tracked({TP0}) == set()
    assert epoch.forgotten
    again, _ = receive(ledger, [Rec(1), Rec(2)])
    epoch.complete([1, 2])  # the old epoch's completion
    assert again.epoch == epoch.epoch + 1
    assert ledger.committable() == {TP0: OffsetAndMetadata(1, "", -1)}


def test_ledger_pauses_a_partition_past_its_share_of_the_bytes_and_resumes_at_half():
    """With max_bytes, a partition pauses once the keys and values received since its
    watermark reach its share (max_bytes over the partitions tracked), however few records;
    it resumes once the watermark has passed all but half its share."""
    ledger = PartitionLedger(limit=1000, resume_at=500, counters=Counters(), max_bytes=4000)
    big = [Rec(i, value=b"x" * 1000) for i in range(2)]
    epoch0, _ = receive(ledger, big)  # 2,000 bytes: under a share of 4,000 alone
    assert ledger.flow() == ([], [])
    assert ledger.held_bytes() == 2000
    receive(ledger, [Rec(0, value=b"y" * 10)], tp=TP1)  # two partitions: shares of 2,000
    assert ledger.flow() == ([TP0], [])
    epoch0.complete([0])  # the first record's chunk is the whole poll: still held
    assert ledger.flow() == ([], [])
    third, _ = receive(ledger, [Rec(2, value=b"z" * 1500)])  # fetched before the pause
    epoch0.complete([1])
    assert ledger.flow() == ([], [])  # 1,500 bytes left: more than half a share (1,000)
    assert ledger.held_bytes() == 1510
    third.complete([2])
    assert ledger.flow() == ([], [TP0])
    assert ledger.held_bytes() == 10
    ledger.revoke({TP0, TP1})
    assert ledger.held_bytes() == 0


def test_received_bytes_are_released_once_the_watermark_passes_a_whole_poll():
    """A poll's bytes count until the watermark passes its last record."""
    held: ReceivedBytes[str] = ReceivedBytes()
    held.receive("p", 9, 100)
    held.receive("p", 19, 50)
    assert held.release("p", None) == 150
    assert held.release("p", 9) == 150  # offset 9 is not done: its chunk stays
    assert held.release("p", 10) == 50
    assert held.release("p", 20) == 0
    assert held.release("q", 5) == 0
    assert held.total() == 0


# -- pool -------------------------------------------------------------------------------------


def pool_for(fn, shards, ordering="key", counters=None, **options):
    handler, handler_counters = handler_for(fn, **options)
    counters = counters or handler_counters
    return WorkerPool({0: 1}, shards, ordering, handler, counters), counters


def test_pool_runs_one_lane_in_order_and_lanes_in_parallel():
    """Records of one lane never overlap and keep push order; other lanes run meanwhile."""
    log, lock = [], threading.Lock()

    def run(record):
        with lock:
            log.append(("start", record.key, record.offset))
        time.sleep(0.01)
        with lock:
            log.append(("end", record.key, record.offset))

    pool, counters = pool_for(run, shards=4)
    ledger = PartitionLedger(limit=100, resume_at=50, counters=counters)
    epoch, records = receive(ledger, [Rec(i, key=i % 2) for i in range(10)])
    pool.start()
    pool.push([(0, TP0, epoch, records)])
    wait_for(lambda: epoch.in_flight() == 0)
    pool.close()
    assert counters.snapshot().handled == 10
    for lane in (0, 1):
        events = [(e, o) for e, key, o in log if key == lane]
        assert events == [(e, i) for i in range(lane, 10, 2) for e in ("start", "end")]
    keys_running = set()
    overlapped = False
    for event, key, _ in log:
        if event == "start":
            overlapped |= bool(keys_running)
            keys_running.add(key)
        else:
            keys_running.discard(key)
    assert overlapped


def test_a_pool_marks_every_record_done_in_its_epoch_and_keeps_key_order():
    """A thousand records on seven keys: each is handled once, in key order, marked done in its
    epoch (the watermark passes them all) and counted."""
    seen = []
    pool, counters = pool_for(seen.append, shards=1)
    ledger = PartitionLedger(limit=10_000, resume_at=50, counters=counters)
    epoch, records = receive(ledger, [Rec(i, key=i % 7) for i in range(1000)])
    pool.push([(0, TP0, epoch, records)])
    pool.start()
    wait_for(lambda: epoch.in_flight() == 0)
    pool.close()
    assert len(seen) == 1000 and counters.snapshot().handled == 1000
    for key in range(7):
        assert [r.offset for r in seen if r.key == key] == list(range(key, 1000, 7))
    assert ledger.committable() == {TP0: OffsetAndMetadata(1000, "", -1)}


class StuckAt:
    """A handler that keeps every record it handled and blocks in the one at ``offset`` (and
    sets ``stuck``) until ``release`` is set."""

    def __init__(self, offset):
        self.offset = offset
        self.stuck, self.release = threading.Event(), threading.Event()
        self.handled = []

    def __call__(self, record):
        if record.offset == self.offset:
            self.stuck.set()
            self.release.wait(10)
        self.handled.append(record)


def test_records_behind_a_stuck_one_in_its_batch_are_reclaimed_for_other_workers():
    """A worker stuck in one record of a large batch gives the rest back on reclaim(): another
    worker handles the other keys meanwhile, and the stuck record's own key waits for it."""
    run = StuckAt(100)
    stuck, release, handled = run.stuck, run.release, run.handled
    pool, counters = pool_for(run, shards=2)
    ledger = PartitionLedger(limit=1000, resume_at=50, counters=counters)
    epoch, records = receive(ledger, [Rec(i, key=i % 10) for i in range(100)])
    pool.start()
    try:
        pool.push([(0, TP0, epoch, records)])
        wait_for(lambda: len(handled) == 100)  # the handler is fast: batches grow large
        epoch, records = receive(ledger, [Rec(i, key=i % 10) for i in range(100, 200)])
        pool.push([(0, TP0, epoch, records)])
        assert stuck.wait(10)
        assert pool.reclaim(0.0) > 0
        wait_for(lambda: len(handled) == 190)
        assert {r.key for r in handled[100:]} == set(range(1, 10))
    finally:
        release.set()
    wait_for(lambda: len(handled) == 200)
    pool.close()
    assert [r.offset for r in handled if r.key == 0] == list(range(0, 200, 10))
    assert ledger.committable() == {TP0: OffsetAndMetadata(200, "", -1)}


def test_records_finished_before_a_stuck_one_in_its_batch_are_marked_on_reclaim():
    """A worker marks a batch's records done once per partition epoch, at the end; stuck in a
    record, it has not marked those it finished before it: reclaim() does, so the watermark
    (what a commit may cover) reaches the stuck record."""
    run = StuckAt(5)
    pool, counters = pool_for(run, shards=1)
    pool._limit = lambda level: MAX_BATCH  # one batch, whatever pace was measured
    ledger = PartitionLedger(limit=1000, resume_at=50, counters=counters)
    epoch, records = receive(ledger, [Rec(i, key=i) for i in range(10)])
    pool.push([(0, TP0, epoch, records)])
    pool.start()
    try:
        assert run.stuck.wait(10)
        assert [record.offset for record in run.handled] == list(range(5))
        assert epoch.watermark() == 0  # finished, not marked yet
        pool.reclaim(0.0)
        assert epoch.watermark() == 5
    finally:
        run.release.set()
    wait_for(lambda: epoch.in_flight() == 0)
    pool.close()
    assert epoch.watermark() == 10


def test_wait_progress_ends_at_the_first_batch_handed_back():
    """The polling thread's wait while a partition is paused: over at once when the pool has
    nothing to do or a batch came back since it looked, else at the next hand-back, not at
    the end of its budget."""
    started, release = threading.Event(), threading.Event()

    def run(record):
        started.set()
        release.wait(30)

    pool, counters = pool_for(run, shards=1)
    ledger = PartitionLedger(limit=1000, resume_at=50, counters=counters)
    pool.start()
    try:
        began = time.monotonic()
        pool.wait_progress(pool.handed_back, 30)  # idle: nothing would come back
        assert time.monotonic() - began < 5
        epoch, records = receive(ledger, [Rec(0)])
        seen = pool.handed_back
        pool.push([(0, TP0, epoch, records)])
        assert started.wait(10)
        waiter = threading.Thread(target=pool.wait_progress, args=(seen, 30))
        waiter.start()
        waiter.join(0.2)
        assert waiter.is_alive()  # the record runs: nothing came back yet
        release.set()
        waiter.join(10)
        assert not waiter.is_alive()
        assert pool.handed_back == seen + 1 and epoch.in_flight() == 0
        began = time.monotonic()
        pool.wait_progress(seen, 30)  # a batch came back since ``seen``
        assert time.monotonic() - began < 5
    finally:
        release.set()
        pool.close()


def test_a_record_not_done_halts_dispatch_at_once():
    """After a failure nothing queued runs, later pushes are refused, and the failure is kept."""
    ran = []

    def run(record):
        ran.append(record.offset)
        if record.offset == 0:
            raise ValueError("bad")

    pool, counters = pool_for(run, shards=1, max_attempts=1)
    ledger = PartitionLedger(limit=100, resume_at=50, counters=counters)
    epoch, records = receive(ledger, [Rec(i) for i in range(5)])
    pool.push([(0, TP0, epoch, records)])
    pool.start()
    wait_for(lambda: pool.halted)
    other, more = receive(ledger, [Rec(0)], tp=TP1)
    pool.push([(0, TP1, other, more)])
    assert pool.wait_idle(None, 5)
    pool.close()
    assert ran == [0]
    assert pool.sizes() == (0, 0)
    assert pool.failure.record.offset == 0 and pool.failure.result.outcome is Outcome.FAILED
    assert counters.snapshot().failed == 1 and ledger.committable()[TP0].offset == 0


def test_a_revoked_partitions_records_are_not_run_and_count_as_stale():
    """discard() drops queued records; a record running meanwhile completes on its old epoch,
    counted as stale, and moves nothing of the new one."""
    started, release = threading.Event(), threading.Event()

    def run(record):
        if record.offset == 0:
            started.set()
            release.wait(10)

    pool, counters = pool_for(run, shards=2, ordering="partition")
    ledger = PartitionLedger(limit=100, resume_at=50, counters=counters)
    epoch, records = receive(ledger, [Rec(i) for i in range(3)])
    pool.start()
    pool.push([(0, TP0, epoch, records)])
    assert started.wait(10)
    assert pool.discard({TP0}) == 2
    assert not pool.wait_idle({TP0}, 0.05)  # offset 0 still runs
    ledger.revoke({TP0})
    release.set()
    assert pool.wait_idle({TP0}, 10)
    pool.close()
    assert counters.snapshot().stale_completions == 1
    assert counters.snapshot().handled == 1


# -- handling ---------------------------------------------------------------------------------


def test_retry_delays_double_up_to_the_maximum():
    """100 ms, 200, 400, then capped at 500."""
    assert list(itertools.islice(retry_delays(100, 500), 5)) == [0.1, 0.2, 0.4, 0.5, 0.5]


def handler_for(fn, stopping=None, on_failure=None, **options):
    config = ExecutorConfig(retry_backoff_ms=0, **options)
    counters = Counters()
    handler = RecordHandler(
        fn, config, on_failure=on_failure, stopping=stopping or threading.Event(),
        count=counters.add,
    )
    return handler, counters


def failing(error=None):
    def handle(record):
        raise error or ValueError("bad")

    return handle


def test_a_handler_is_retried_then_the_record_fails_under_stop():
    """max_attempts calls, retries counted, FAILED with the last error."""
    handler, counters = handler_for(failing(), max_attempts=3)
    result = handler.process(Rec(7), ("t", 0, 7))
    assert (result.outcome, result.attempts, type(result.error)) == (Outcome.FAILED, 3, ValueError)
    assert counters.snapshot().retries == 2


def test_dead_letter_carries_the_record_and_the_failure_in_headers():
    """The dead letter keeps value, key and headers and adds the documented ones."""
    sent = []

    class Producer:
        def send(self, topic, value, key, headers):
            sent.append((topic, value, key, headers))
            return type("Done", (), {"get": lambda self, timeout: None})()

    handler, _ = handler_for(
        failing(), max_attempts=1, failure_policy="dead_letter", dead_letter_topic="dlq"
    )
    handler.dead_letter_producer = Producer()
    result = handler.process(Rec(3, key=b"k", headers=[("h", b"1")]), ("t", 0, 3))
    assert result.outcome is Outcome.DEAD_LETTERED
    topic, value, key, headers = sent[0]
    assert (topic, value, key) == ("dlq", b"v", b"k")
    assert headers[0] == ("h", b"1")
    assert [name for name, _ in headers[1:]] == list(DEAD_LETTER_HEADERS)
    assert headers[1:][1:] == [
        ("dead_letter.topic", b"t"), ("dead_letter.partition", b"0"),
        ("dead_letter.offset", b"3"), ("dead_letter.attempts", b"1"),
    ]


def test_a_failing_callback_fails_the_record_with_the_handler_error_as_cause():
    """If the failure callback raises, the record is not done."""
    handler, _ = handler_for(
        failing(), max_attempts=1, failure_policy="callback",
        on_failure=lambda record, error, attempts: failing(OSError("callback down"))(record),
    )
    result = handler.process(Rec(0), ("t", 0, 0))
    assert result.outcome is Outcome.FAILED
    assert isinstance(result.error, OSError) and isinstance(result.error.__cause__, ValueError)


def test_stopping_cuts_retries_short_and_abandons_the_record():
    """A stop during a retry wait abandons the record (it will come again)."""
    stopping = threading.Event()
    stopping.set()
    handler, _ = handler_for(failing(), stopping=stopping, max_attempts=5)
    assert handler.process(Rec(0), ("t", 0, 0)).outcome is Outcome.ABANDONED


def test_async_handlers_run_on_the_event_loop():
    """An async def handler is awaited on the handler's loop thread."""
    seen = []

    async def handle(record):
        await asyncio.sleep(0)
        seen.append(record.offset)

    handler, _ = handler_for(handle)
    handler.start()
    try:
        assert handler.process(Rec(4), ("t", 0, 4)).outcome is Outcome.HANDLED
    finally:
        handler.close()
    assert seen == [4]


# -- the loop on a fake consumer --------------------------------------------------------------


@contextlib.contextmanager
def running(executor):
    """Run the executor in a thread for the block; stop it and wait for it however the block
    ends (a failed assertion must not leave the loop running: the interpreter would not exit).
    Yields the list of what run() raised."""
    errors = []

    def target():
        try:
            executor.run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="executor-under-test")
    thread.start()
    try:
        yield errors
    finally:
        executor.stop()
        thread.join(10)
        assert not thread.is_alive(), f"run() did not return within 10 s of stop(): {executor!r}"


def wait_for(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_every_record_is_handled_once_and_committed_on_stop():
    """The loop handles all records of all partitions and commits after the last one."""
    consumer = FakeConsumer({TP0: [(b"a", b"1")] * 30, TP1: [(b"b", b"2")] * 20})
    consumer.subscribe(["t"])
    handled = []
    executor = ShardedExecutor(consumer, lambda r: handled.append(r.offset), shards=4,
                               commit_interval_ms=0)
    with running(executor) as errors:
        wait_for(lambda: len(handled) == 50)
    assert not errors
    assert consumer.committed_offsets() == {TP0: 30, TP1: 20}
    assert consumer.closed
    stats = executor.stats()
    assert isinstance(stats, ExecutorStats) and stats.handled == 50 and stats["handled"] == 50


def test_a_failure_under_stop_raises_a_handler_error_naming_the_record():
    """HandlerError carries topic, partition, offset, attempts and policy; commit stops there."""
    consumer = FakeConsumer({TP0: [(None, b"x")] * 10})
    consumer.subscribe(["t"])

    def handle(record):
        if record.offset == 4:
            raise ValueError("boom")

    executor = ShardedExecutor(consumer, handle, shards=1, ordering="partition",
                               max_attempts=2, retry_backoff_ms=0)
    with pytest.raises(HandlerError, match=r"t\[0\]@4 \('stop' policy\): ValueError") as info:
        executor.run()
    error = info.value
    assert (error.topic, error.partition, error.offset, error.attempts, error.policy) == (
        "t", 0, 4, 2, "stop",
    )
    assert consumer.committed_offsets()[TP0] == 4


def test_a_revoke_commits_the_finished_watermark_of_the_revoked_partition():
    """The rebalance hook commits what is done of a revoked partition before it moves."""
    consumer = FakeConsumer({TP0: [(None, b"x")] * 5, TP1: [(None, b"y")] * 5})
    consumer.subscribe(["t"])
    handled = []
    executor = ShardedExecutor(consumer, lambda r: handled.append(r), shards=2,
                               commit_interval_ms=60_000)
    executor.subscribe(["t"])
    with running(executor) as errors:
        wait_for(lambda: len(handled) == 10)
        consumer.revoke({TP1})
        wait_for(lambda: {TP1: 5} in consumer.commits)  # the periodic commit is a minute away
    assert not errors


class _LateRevokeConsumer(FakeConsumer):
    """librdkafka's order: a poll collects records, then serves a revoke that came in, and
    returns what it collected, the revoked partition's records among them."""

    def poll(self, timeout_ms=0, max_records=None):
        revoked, self.pending_revoke = self.pending_revoke, None
        batch = super().poll(timeout_ms, max_records)
        if revoked is not None:
            asyncio.run(self.listener.on_partitions_revoked(revoked))
            self.assigned -= revoked
        return batch


def test_records_a_poll_returns_for_a_partition_revoked_during_it_are_not_handled():
    """Nothing is handled of a partition after its revoke: the records fetched before it that
    the same poll returned are dropped (counted in revoked_records), the others handled."""
    consumer = _LateRevokeConsumer({TP0: [(None, b"x")] * 10, TP1: [(None, b"y")] * 10},
                                   max_poll_records=20)
    handled = []
    executor = ShardedExecutor(consumer, lambda r: handled.append((r.partition, r.offset)),
                               shards=2, commit_interval_ms=60_000)
    executor.subscribe(["t"])
    consumer.revoke({TP1})
    with running(executor) as errors:
        wait_for(lambda: len(handled) == 10)
        assert executor.stats().revoked_records == 10
    assert not errors
    assert sorted(handled) == [(0, offset) for offset in range(10)]
    assert TP1 not in consumer.committed_offsets()


def test_construction_checks_consumer_and_dead_letter_producer():
    """A non-consumer and a dead-letter policy without a producer fail at construction."""
    with pytest.raises(TypeError, match="'consumer' must be a KafkaConsumer"):
        ShardedExecutor(object(), print)
    consumer = FakeConsumer({TP0: []})
    with pytest.raises(ConfigError, match="pass 'dead_letter_producer'"):
        ShardedExecutor(consumer, print, failure_policy="dead_letter", dead_letter_topic="dlq")
    ShardedExecutor(FakeConsumer({TP0: []}, bootstrap_servers="127.0.0.1:1"), print,
                    failure_policy="dead_letter", dead_letter_topic="dlq")


@pytest.mark.parametrize("policy", ["dead_letter", "callback", "stop"])
def test_an_undeserializable_record_goes_through_the_failure_policy(policy):
    """dead_letter sends its raw bytes and consumption goes on; callback gets the raw record;
    stop raises HandlerError caused by the DeserializationError and commits below it."""
    consumer = FakeConsumer({TP0: [(b"k", str(i).encode()) for i in range(10)]})
    consumer.undeserializable = {(TP0, 4)}
    consumer.subscribe(["t"])
    sent, failed, handled = [], [], []

    class Producer:
        def send(self, topic, value, key, headers):
            sent.append((value, dict(headers)))
            return type("Done", (), {"get": lambda self, timeout: None})()

        def close(self):
            pass

    executor = ShardedExecutor(
        consumer, lambda r: handled.append(r.offset), shards=2, failure_policy=policy,
        dead_letter_topic="dlq", dead_letter_producer=Producer(),
        on_failure=lambda record, error, attempts: failed.append((record.offset, error)),
        commit_interval_ms=0,
    )
    if policy == "stop":
        with pytest.raises(HandlerError, match=r"t\[0\]@4") as info:
            executor.run()
        assert isinstance(info.value.error, DeserializationError)
        assert consumer.committed_offsets()[TP0] <= 4
        return
    with running(executor) as errors:
        wait_for(lambda: len(handled) == 9)
        wait_for(lambda: consumer.committed_offsets().get(TP0) == 10)
    assert not errors and 4 not in handled
    if policy == "dead_letter":
        assert [value for value, _ in sent] == [b"4"]
        assert sent[0][1]["dead_letter.offset"] == b"4"
        assert sent[0][1]["dead_letter.error"].startswith(b"DeserializationError")
    else:
        assert [offset for offset, _ in failed] == [4]
        assert isinstance(failed[0][1], DeserializationError)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"shards": 5000}, "'shards' must be at most 1024 \\(got 5000\\)"),
        ({"poll_timeout_ms": 10**12}, "'poll_timeout_ms' must be at most 3600000"),
        ({"dead_letter_topic": 5}, "'dead_letter_topic' must be a Kafka topic name \\(.*got 5\\)"),
        ({"dead_letter_topic": "a b"}, "'dead_letter_topic' must be a Kafka topic name"),
        ({"max_attempts": 10**9}, "'max_attempts' must be at most 1000000"),
    ],
)
def test_settings_have_sane_upper_bounds(options, message):
    """Values past the bounds fail at construction, naming the setting and the value."""
    with pytest.raises(ConfigError, match=message):
        ExecutorConfig(**options)


def test_a_stuck_record_pauses_its_partition_while_later_ones_complete():
    """The pause rule counts what a crash would replay, so one stuck record bounds it."""
    ledger = PartitionLedger(limit=5, resume_at=2, counters=Counters())
    epoch, _ = receive(ledger, [Rec(i) for i in range(5)])
    epoch.complete([1, 2, 3, 4])  # everything but offset 0 is done
    assert ledger.flow() == ([TP0], [])
    assert ledger.flow() == ([], [])  # stays paused while offset 0 is stuck
    epoch.complete([0])
    assert ledger.flow() == ([], [TP0])


def test_a_stuck_handler_is_reported_and_bounds_what_a_crash_would_replay(caplog):
    """One record that does not return: a warning names it, its partition pauses after
    max_in_flight_per_partition records, and the commit stays at it."""
    consumer = FakeConsumer({TP0: [(str(i % 7).encode(), b"x") for i in range(500)]})
    consumer.subscribe(["t"])
    release = threading.Event()
    handled = []

    def handle(record):
        if record.offset == 3:
            release.wait(20)
        handled.append(record.offset)

    executor = ShardedExecutor(consumer, handle, shards=4, max_in_flight_per_partition=50,
                               stuck_warning_ms=1, commit_interval_ms=0)
    with running(executor) as errors:
        try:
            wait_for(lambda: executor.stats().stuck_warnings == 1)
            wait_for(lambda: TP0 in consumer.paused())
            time.sleep(0.2)  # paused: nothing more arrives
            assert len(handled) < 50 + consumer.max_poll_records
            assert consumer.committed_offsets()[TP0] == 3
            assert "t[0]@3 has been running" in caplog.text
        finally:
            release.set()
        wait_for(lambda: len(handled) == 500)
    assert not errors


# -- offset maps on the fake ------------------------------------------------------------------


def restarted(consumer):
    """A fresh fake over the same records that resumes from ``consumer``'s commits, as a
    restarted process does."""
    again = FakeConsumer({tp: consumer.records[tp] for tp in consumer.records})
    again.stored = dict(consumer.stored)
    for tp, meta in consumer.stored.items():
        again.positions[tp] = meta.offset
    again.subscribe(["t"])
    return again


def run_until_stuck(consumer, stuck_offset, count, until, **options):
    """Run an executor whose handler never finishes ``stuck_offset`` until ``count`` records
    are handled and ``until(consumer)`` holds; return the executor."""
    release = threading.Event()
    handled = []

    def handle(record):
        if record.offset == stuck_offset:
            # Stuck past every wait below (released when they end): released earlier, its
            # key's later records would be handled and ``count`` overshot, never met.
            release.wait(120)
            return
        handled.append(record.offset)

    executor = ShardedExecutor(consumer, handle, shards=4, commit_interval_ms=0,
                               drain_timeout_ms=0, **options)
    try:
        with running(executor) as errors:
            wait_for(lambda: len(handled) == count, 30)
            wait_for(lambda: until(consumer), 30)
    finally:
        release.set()
    assert not errors
    return executor


def carries(count):
    """Whether a fake's commit of TP0 carries ``count`` offsets in its map."""
    def check(consumer):
        meta = consumer.stored.get(TP0)
        return meta is not None and len(decode_offset_map(meta.metadata, meta.offset).map) == count
    return check


def test_a_restart_handles_again_only_what_was_not_finished():
    """One record stuck (and its key's later records behind it), the rest done: the commit
    stays at the stuck record and its map carries the rest, so a restart handles only the
    stuck key's records."""
    consumer = FakeConsumer({TP0: [(str(i % 5).encode(), b"x") for i in range(40)]})
    consumer.subscribe(["t"])
    first = run_until_stuck(consumer, 2, 32, carries(30))  # key "2"'s first record
    assert consumer.stored[TP0].offset == 2
    assert first.stats().largest_offset_map == len(consumer.stored[TP0].metadata)
    again = restarted(consumer)
    handled_again = []
    second = ShardedExecutor(again, lambda r: handled_again.append(r.offset), shards=4,
                             commit_interval_ms=0)
    with running(second) as errors:
        wait_for(lambda: again.stored[TP0].offset == 40, 30)
    assert not errors
    assert sorted(handled_again) == list(range(2, 40, 5))
    assert second.stats().skipped_completed == 30


def test_without_the_map_a_restart_handles_everything_above_the_commit_again():
    """offset_map=False: the commit is the watermark alone, without metadata."""
    consumer = FakeConsumer({TP0: [(str(i % 5).encode(), b"x") for i in range(40)]})
    consumer.subscribe(["t"])
    run_until_stuck(consumer, 2, 32, lambda c: c.stored[TP0].offset == 2, offset_map=False)
    assert consumer.stored[TP0].metadata == ""


@pytest.mark.parametrize("metadata", ["spark-checkpoint-7", "pkmap1:AAAA", "pkmap9:x"])
def test_foreign_metadata_in_a_commit_is_ignored_with_a_warning(metadata, caplog):
    """Another tool's metadata (or a corrupt map) replays from the committed offset, as a
    commit without a map does; the warning names the partition and the reason."""
    consumer = FakeConsumer({TP0: [(None, b"x")] * 20})
    consumer.positions[TP0] = 5
    consumer.stored = {TP0: OffsetAndMetadata(5, metadata, -1)}
    consumer.subscribe(["t"])
    handled = []
    executor = ShardedExecutor(consumer, lambda r: handled.append(r.offset), shards=2,
                               commit_interval_ms=0)
    with running(executor) as errors:
        wait_for(lambda: consumer.stored[TP0].offset == 20, 30)
    assert not errors and sorted(handled) == list(range(5, 20))
    assert executor.stats().ignored_offset_maps == 1
    assert "t[0]@5: ignored the commit metadata" in caplog.text


@pytest.mark.parametrize("start", [0, 12])
def test_records_below_the_groups_commit_are_skipped_and_fetched_from_it(start, caplog):
    """A client that fetches from below the group's commit (a position kept from an earlier
    assignment, an old answer about the commit: the chaos soak's outputs written twice) hands
    the executor records another owner handled and committed: none is handled again, no
    commit goes below the group's, and the partition is read on from the commit."""
    consumer = FakeConsumer({TP0: [(None, b"x")] * 20}, max_poll_records=4)
    consumer.positions[TP0] = start  # 12: all of the first batch is below the commit
    consumer.stored = {TP0: OffsetAndMetadata(16 if start else 5, "", -1)}
    consumer.subscribe(["t"])
    handled = []
    executor = ShardedExecutor(consumer, lambda r: handled.append(r.offset), shards=2,
                               commit_interval_ms=0)
    with running(executor) as errors:
        wait_for(lambda: consumer.stored[TP0].offset == 20, 30)
    assert not errors
    first = 16 if start else 5
    assert sorted(handled) == list(range(first, 20))
    assert all(commit[TP0] >= first for commit in consumer.commits)
    assert executor.stats().skipped_redeliveries == 4
    assert f"t[0]: records from offset {start} came, below its commit at {first}" in caplog.text


def test_a_broker_refusing_long_metadata_halves_the_map_and_keeps_committing(caplog):
    """A broker whose offset.metadata.max.bytes is below the executor's setting refuses the
    commit: the map is cut to half at once (down to none at all), and the watermark is
    committed all the same: consumption never stalls on the map."""
    from priority_kafka._types import MetadataTooLarge

    class SmallLimit(FakeConsumer):
        def commit(self, offsets):
            if any(len(meta.metadata) > 10 for meta in offsets.values()):
                raise MetadataTooLarge("too large")
            super().commit(offsets)

    consumer = SmallLimit({TP0: [(str(i % 7).encode(), b"x") for i in range(100)]})
    consumer.subscribe(["t"])
    executor = run_until_stuck(consumer, 3, 86, lambda c: TP0 in c.stored,
                               offset_metadata_max_bytes=200)
    assert consumer.stored[TP0] == OffsetAndMetadata(3, "", -1)
    assert "offset maps are now cut to 99 bytes" in caplog.text  # of 199: 200 less a NUL
    # 199 -> 99 -> 49 -> 24 -> 12: no map fits 12 bytes, the commit goes without one.
    assert executor.stats().commit_failures == 4


def test_run_signals_default_handles_ctrl_c_on_the_main_thread_only():
    """run()'s default: Ctrl-C calls stop() on the main thread (a second one interrupts at
    once, and the previous handler is back afterwards); elsewhere the signals are left alone;
    False leaves them alone on the main thread too."""
    import signal

    from priority_kafka.errors import IllegalStateError
    from priority_kafka.executor import run_signals

    stops = []
    # Python's own Ctrl-C handler as the one before (a pytest-xdist worker ignores SIGINT).
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with run_signals(None, lambda: stops.append(1)):
            signal.raise_signal(signal.SIGINT)
            assert stops == [1]
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt), run_signals(False, lambda: stops.append(2)):
            signal.raise_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, outer)
    assert stops == [1]

    found = {}

    def off_main():
        found["default"] = run_signals(None, lambda: None)
        try:
            with run_signals(True, lambda: None):
                pass
        except IllegalStateError as exc:
            found["insisted"] = exc

    thread = threading.Thread(target=off_main)
    thread.start()
    thread.join()
    assert isinstance(found["default"], contextlib.nullcontext)
    assert "main thread" in str(found["insisted"])
    with pytest.raises(ConfigError,
                       match=r"'handle_signals' must be True, False or None \(got 'yes'\)"):
        run_signals("yes", lambda: None)  # type: ignore[arg-type]
