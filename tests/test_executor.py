"""Tests of priority_kafka.executor: ShardedExecutor against the real broker, and its config."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sized
from pathlib import Path
from typing import Any

import psutil
import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import TopicPartition

from benchmarks import executor_child as child
from benchmarks._running import Running, wait_for
from priority_kafka.errors import ConfigError, HandlerError, IllegalStateError
from priority_kafka.executor import DEAD_LETTER_HEADERS, ExecutorConfig, ShardedExecutor
from priority_kafka.kafka_python._kafka import keeping_pending_join
from tests.fakes import FakeConsumer

CHILD = Path(child.__file__)


# -- helpers ----------------------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


def produce(
    bootstrap: str, topic: str, count: int, keys: int = 0, size: int = 0, partitions: int = 1
) -> None:
    """Produce ``count`` records; with ``keys``, key ``k`` carries values ``k:0``, ``k:1``, ..."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=512 * 1024)
    seq: Counter[int] = Counter()
    try:
        for i in range(count):
            if keys:
                k = i % keys
                value = f"{k}:{seq[k]}".encode().ljust(size, b" ")
                seq[k] += 1
                producer.send(topic, key=str(k).encode(), value=value)
            else:
                producer.send(topic, value=str(i).encode().ljust(size, b" "),
                              partition=i % partitions)
        producer.flush()
    finally:
        producer.close()


def loaded_topic(
    bootstrap: str,
    unique_name: Callable[[str], str],
    prefix: str,
    count: int,
    partitions: int = 1,
    **produce_options: int,
) -> tuple[str, str]:
    """A new topic holding ``count`` records from ``produce``, and a new group name."""
    topic, group = unique_name(prefix), unique_name("g")
    create_topic(bootstrap, topic, partitions)
    produce(bootstrap, topic, count, partitions=partitions, **produce_options)
    return topic, group


def note_sequence(seen: dict[str, list[int]], record: Any) -> None:
    """Append the sequence number ``produce(keys=...)`` gave ``record`` to its key's list."""
    key, seq = record.value.decode().split(":")
    seen[key].append(int(seq))


def consumer_for(bootstrap: str, topic: str | None, group: str, **configs: Any) -> KafkaConsumer:
    """A KafkaConsumer of ``group`` from the start, subscribed to ``topic`` (if any); its polls
    keep a pending join (a reader of a fresh group could otherwise get no partition for ever:
    priority_kafka.kafka_python._kafka.FORGETS_PENDING_JOIN, seen in
    tests/faults/test_poison.py)."""
    topics = () if topic is None else (topic,)
    return keeping_pending_join(KafkaConsumer(
        *topics, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest", **configs,
    ))


def committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {tp: meta.offset for tp, meta in offsets.items()}


def wait_committed(bootstrap: str, group: str, topic: str, offset: int, what: str) -> None:
    """Wait until ``group`` has committed ``offset`` on partition 0 of ``topic``."""
    wait_for(lambda: committed(bootstrap, group).get(TopicPartition(topic, 0)) == offset, 30, what)


def join_and_leave(
    make: Callable[[], ShardedExecutor],
    handled: Counter[Any],
    total: int,
    running: Callable[..., Running],
    caplog: pytest.LogCaptureFixture,
) -> tuple[ShardedExecutor, ShardedExecutor]:
    """Run one executor, add a second to its group until it handled some records, stop it,
    and let the first finish all ``total`` records; check that nothing failed."""
    caplog.set_level(logging.WARNING, logger="priority_kafka.executor")
    first = make()
    run_a = running(first)
    wait_for(lambda: len(handled) >= total // 15, 60, "first executor to start")
    second = make()
    run_b = running(second)
    wait_for(lambda: second.stats().get("handled", 0) >= total // 40, 60, "second to share")
    run_b.stop()
    wait_for(lambda: len(handled) >= total, 120, "all records")
    run_a.stop()
    assert run_a.error is None and run_b.error is None
    assert [r.getMessage() for r in caplog.records if "commit" in r.getMessage()] == []
    print(f"join and leave: {sum(handled.values()) - total} duplicates of {total}")
    return first, second


def spawn_child(
    bootstrap: str, topic: str, group: str, out: Path, levels: int = 0, instance: str = "child-1",
    client: str = "kafka-python", extra: tuple[str, ...] = (), stderr: Any = None,
) -> subprocess.Popen[str]:
    """Start benchmarks/executor_child.py (``extra``: more of its options; ``stderr``: where its
    log goes, the test's own by default) and wait until its executor is about to run."""
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), bootstrap, topic, group, str(out), instance, str(levels),
         "--client", client, *extra],
        stdout=subprocess.PIPE, stderr=stderr, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def running() -> Iterator[Callable[[ShardedExecutor], Running]]:
    """Start executors on threads; every one still running is stopped at the end."""
    started: list[Running] = []

    def start(executor: ShardedExecutor) -> Running:
        started.append(Running(executor))
        return started[-1]

    yield start
    for run in started:
        run.stop()


def run_until_recorded(
    running: Callable[..., Running],
    executor: ShardedExecutor,
    recorded: Mapping[Any, Sized],
    count: int,
    timeout: float,
) -> Running:
    """Run ``executor`` until the handler recorded ``count`` values in all, then stop it."""
    run = running(executor)
    wait_for(lambda: sum(map(len, recorded.values())) >= count, timeout, f"{count} records")
    run.stop()
    return run


# -- config (no broker) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"shards": 0}, "'shards' must be at least 1 \\(got 0\\)"),
        ({"ordering": "keys"}, "'ordering' must be one of key, partition, unordered"),
        ({"max_attempts": 0}, "'max_attempts' must be at least 1 \\(got 0\\)"),
        ({"commit_interval_ms": -1}, "'commit_interval_ms' must be at least 0"),
        ({"failure_policy": "ignore"}, "'failure_policy' must be one of dead_letter, callback"),
        ({"failure_policy": "dead_letter"}, "'dead_letter_topic' must be a topic name"),
        ({"max_in_flight_per_partition": 10, "resume_in_flight_per_partition": 10},
         "'resume_in_flight_per_partition' must be below 'max_in_flight_per_partition' \\(10\\)"),
        ({"retry_backoff_ms": 50, "retry_backoff_max_ms": 10}, "'retry_backoff_max_ms' must be"),
        ({"async_concurrency": 0}, "'async_concurrency' must be at least 1"),
        ({"max_in_flight_bytes": 1000}, "'max_in_flight_bytes' must be at least 1024 \\(got 1000"),
        ({"shards": True}, "'shards' must be an int"),
    ],
)
def test_bad_config_names_the_value(options: dict[str, Any], message: str) -> None:
    """Each invalid setting is a ConfigError naming the setting and the value."""
    with pytest.raises(ConfigError, match=message):
        ExecutorConfig(**options)


def test_unknown_option_and_missing_callback_are_config_errors() -> None:
    """Unknown options, a non-callable handler and a missing on_failure are ConfigErrors."""
    consumer: Any = FakeConsumer({})
    with pytest.raises(ConfigError, match="unknown executor option in \\['shard'\\]"):
        ShardedExecutor(consumer, print, shard=3)
    with pytest.raises(ConfigError, match="'handler' must be callable"):
        ShardedExecutor(consumer, "print")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'on_failure' must be callable"):
        ShardedExecutor(consumer, print, failure_policy="callback")


def test_resume_threshold_defaults_to_half() -> None:
    """A paused partition resumes at half its in-flight maximum unless told otherwise."""
    assert ExecutorConfig(max_in_flight_per_partition=101).resume_threshold == 50
    assert ExecutorConfig(resume_in_flight_per_partition=3).resume_threshold == 3


# -- broker -----------------------------------------------------------------------------------


@pytest.mark.integration
def test_per_key_order_with_one_partition(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """1 partition, 100 keys, 20k records, random delays: each key in order, all committed."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "order", 20_000, keys=100)
    seen: dict[str, list[int]] = defaultdict(list)
    active: set[bytes] = set()
    overlaps = []
    lock = threading.Lock()

    def handler(record: Any) -> None:
        with lock:
            if record.key in active:
                overlaps.append(record.key)
            active.add(record.key)
        time.sleep(random.random() * 0.001)
        with lock:
            active.discard(record.key)
            note_sequence(seen, record)

    executor = ShardedExecutor(
        consumer_for(bootstrap_servers, topic, group), handler, shards=16,
        max_in_flight_per_partition=1000, commit_interval_ms=200,
    )
    run = run_until_recorded(running, executor, seen, 20_000, 120)
    assert run.error is None
    assert overlaps == []
    assert len(seen) == 100
    assert all(values == list(range(200)) for values in seen.values())
    assert committed(bootstrap_servers, group) == {TopicPartition(topic, 0): 20_000}
    assert executor.stats()["pauses"] >= 1


@pytest.mark.integration
@pytest.mark.parametrize("ordering", ["partition", "unordered"])
def test_partition_and_unordered_modes(
    bootstrap_servers: str,
    unique_name: Callable[[str], str],
    running: Callable[..., Running],
    ordering: str,
) -> None:
    """'partition' runs one record of a partition at a time, in order; 'unordered' runs many."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "modes", 1000, partitions=2)
    order: dict[int, list[int]] = defaultdict(list)
    concurrent = [0, 0]  # now, max
    lock = threading.Lock()

    def handler(record: Any) -> None:
        with lock:
            concurrent[0] += 1
            concurrent[1] = max(concurrent)
        time.sleep(0.001)
        with lock:
            concurrent[0] -= 1
            order[record.partition].append(record.offset)

    executor = ShardedExecutor(
        consumer_for(bootstrap_servers, topic, group), handler, shards=8,
        ordering=ordering,  # type: ignore[arg-type]
    )
    run_until_recorded(running, executor, order, 1000, 60)
    assert sorted(o for offs in order.values() for o in offs) == sorted(list(range(500)) * 2)
    if ordering == "partition":
        assert concurrent[1] <= 2
        assert all(offs == sorted(offs) for offs in order.values())
    else:
        assert concurrent[1] > 2


@pytest.mark.integration
def test_kill_9_and_restart_loses_nothing(
    bootstrap_servers: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """Killing the executor process with SIGKILL 3 times, then finishing: every record handled,
    duplicates bounded by what may be in flight or uncommitted at each kill."""
    count, partitions, kills = 6000, 3, 3
    topic, group = loaded_topic(bootstrap_servers, unique_name, "crash", count, partitions)
    out = tmp_path / "handled.txt"
    out.touch()

    def lines() -> list[str]:
        return out.read_text().splitlines()

    try:
        for kill in range(kills):
            proc = spawn_child(bootstrap_servers, topic, group, out)
            target = len(lines()) + random.randint(300, 900)
            wait_for(lambda target=target: len(lines()) >= target, 60, f"kill {kill}")
            proc.kill()
            proc.wait(10)
        proc = spawn_child(bootstrap_servers, topic, group, out)
        wait_for(lambda: len({line for line in lines()}) >= count, 120, "all records")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    handled = Counter(lines())
    expected = {f"{i % partitions} {i // partitions}" for i in range(count)}
    assert set(handled) == expected  # zero lost
    duplicates = sum(handled.values()) - count
    # Per kill, per partition: what was received and not committed. Records in flight, one
    # poll on top, and what workers completed within one commit interval (plus a poll loop).
    rate = child.SHARDS / child.HANDLER_S
    per_kill = partitions * (child.MAX_IN_FLIGHT + child.MAX_POLL_RECORDS) + rate * (
        child.COMMIT_INTERVAL_MS / 1000 + 0.2
    )
    print(f"kill -9 x{kills}: {duplicates} duplicates of {count} (bound {kills * per_kill:.0f})")
    assert duplicates <= kills * per_kill
    assert committed(bootstrap_servers, group) == {
        TopicPartition(topic, p): count // partitions for p in range(partitions)
    }


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_sigterm_stops_gracefully_without_duplicates(
    bootstrap_servers: str, unique_name: Callable[[str], str], tmp_path: Path,
    sig: signal.Signals,
) -> None:
    """SIGTERM or Ctrl-C (SIGINT) drains running records and commits them, by default (run()
    on the main thread, no handle_signals argument): a restart handles no record twice."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "term", 1500)
    out = tmp_path / "handled.txt"
    out.touch()
    for attempt in range(2):
        proc = spawn_child(bootstrap_servers, topic, group, out, instance="c")
        try:
            goal = 500 if attempt == 0 else 1500
            wait_for(lambda goal=goal: len(out.read_text().splitlines()) >= goal, 60, "records")
            proc.send_signal(sig)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    handled = out.read_text().splitlines()
    assert len(handled) == len(set(handled)) == 1500


@pytest.mark.integration
def test_member_joining_and_leaving_loses_nothing(
    bootstrap_servers: str,
    unique_name: Callable[[str], str],
    running: Callable[..., Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A second executor joins and leaves mid-run: all records handled, no commit fails."""
    count = 8000
    topic, group = loaded_topic(bootstrap_servers, unique_name, "rebalance", count, partitions=4)
    handled: Counter[tuple[int, int]] = Counter()
    lock = threading.Lock()

    def handler(record: Any) -> None:
        time.sleep(0.002)
        with lock:
            handled[(record.partition, record.offset)] += 1

    def executor() -> ShardedExecutor:
        return ShardedExecutor(
            consumer_for(bootstrap_servers, topic, group, max_poll_records=100), handler,
            shards=8, commit_interval_ms=100, max_in_flight_per_partition=200,
        )

    first, second = join_and_leave(executor, handled, count, running, caplog)
    assert set(handled) == {(i % 4, i // 4) for i in range(count)}
    assert first.stats().get("commit_failures", 0) == second.stats().get("commit_failures", 0) == 0
    assert committed(bootstrap_servers, group) == {
        TopicPartition(topic, p): count // 4 for p in range(4)
    }


@pytest.mark.integration
def test_slow_handler_with_backlog_bounds_memory_and_is_not_evicted(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """A slow handler over a big backlog: in-flight and RSS stay bounded, no rebalance happens
    although the backlog takes far longer than max_poll_interval_ms."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "slow", 30_000, size=1000)
    revocations = []
    done = [0]
    measuring = threading.Event()

    class Listener:
        def on_partitions_revoked(self, revoked: Any) -> None:
            # Not the first join (nothing handled yet), nor the close after measuring.
            if done[0] and measuring.is_set():
                revocations.append(revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            pass

    def handler(record: Any) -> None:
        time.sleep(0.02)
        done[0] += 1

    consumer = consumer_for(
        bootstrap_servers, None, group, max_poll_interval_ms=2000, session_timeout_ms=6000,
        heartbeat_interval_ms=1000, max_poll_records=50, max_partition_fetch_bytes=256 * 1024,
    )
    executor = ShardedExecutor(consumer, handler, shards=4, max_in_flight_per_partition=100)
    executor.subscribe([topic], listener=Listener())
    process = psutil.Process()
    rss_start = process.memory_info().rss
    run = running(executor)
    wait_for(lambda: done[0] > 0, 30, "the first record")
    measuring.set()
    peak_in_flight, peak_rss = 0, rss_start
    deadline = time.monotonic() + 8  # 4x max_poll_interval_ms, ~1/20 of the backlog's time
    while time.monotonic() < deadline:
        peak_in_flight = max(peak_in_flight, executor.stats()["in_flight"])
        peak_rss = max(peak_rss, process.memory_info().rss)
        time.sleep(0.05)
    measuring.clear()
    run.stop()
    print(f"slow handler: peak in-flight {peak_in_flight}, RSS start {rss_start >> 20} MiB, "
          f"peak {peak_rss >> 20} MiB (+{(peak_rss - rss_start) >> 20} MiB), handled {done[0]}")
    assert run.error is None
    assert revocations == []  # a rebalance would revoke first: nobody was evicted
    assert peak_in_flight <= 100 + 50
    assert done[0] >= 200
    assert peak_rss - rss_start < 64 << 20


@pytest.mark.integration
def test_big_records_are_bounded_in_bytes_in_order_and_lose_nothing(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """Records of 20 KB on 2 partitions, a record bound that never binds (1,000) and 256 KiB
    of max_in_flight_bytes: partitions pause on bytes, what is held stays within the bytes
    (plus a poll per partition and a share left over when the second partition arrives:
    about 36 records, where the record bound alone lets all 400 in), and every record is
    handled once, in key order, and committed."""
    size, count, polled, budget = 20_000, 400, 5, 256 << 10
    topic, group = loaded_topic(
        bootstrap_servers, unique_name, "big", count, partitions=2, keys=8, size=size
    )
    seen: dict[str, list[int]] = defaultdict(list)
    lock = threading.Lock()

    def handler(record: Any) -> None:
        time.sleep(0.002)
        with lock:
            note_sequence(seen, record)

    executor = ShardedExecutor(
        consumer_for(bootstrap_servers, topic, group, max_poll_records=polled), handler,
        shards=8, max_in_flight_per_partition=1000, max_in_flight_bytes=budget,
        commit_interval_ms=100,
    )
    run = running(executor)
    peak_bytes = peak_records = 0
    deadline = time.monotonic() + 120
    while sum(map(len, seen.values())) < count and time.monotonic() < deadline:
        stats = executor.stats()
        peak_bytes = max(peak_bytes, stats.in_flight_bytes)
        peak_records = max(peak_records, stats.in_flight)
        time.sleep(0.005)
    wait_for(lambda: sum(committed(bootstrap_servers, group).values()) == count, 30,
             "every record committed")
    run.stop()
    print(f"big records: peak {peak_bytes} bytes, {peak_records} records in flight; "
          f"{executor.stats().pauses} pauses")
    assert run.error is None
    assert sorted(map(len, seen.values())) == [count // 8] * 8
    assert all(values == sorted(values) for values in seen.values())
    assert 0 < peak_bytes <= 2 * budget + 2 * polled * (size + 1)
    assert peak_records <= (2 * budget + 2 * polled * size) // size
    assert executor.stats().pauses >= 1


@pytest.mark.integration
def test_retries_then_success_is_handled_once(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """A handler failing twice on a record then succeeding: retried with backoff, committed."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "retry", 20)
    calls: Counter[int] = Counter()
    times: list[float] = []

    def handler(record: Any) -> None:
        calls[record.offset] += 1
        if record.offset == 5 and calls[5] <= 2:
            times.append(time.monotonic())
            raise RuntimeError("flaky")
        if record.offset == 5:
            times.append(time.monotonic())

    executor = ShardedExecutor(
        consumer_for(bootstrap_servers, topic, group), handler, max_attempts=3,
        retry_backoff_ms=50, commit_interval_ms=0,
    )
    run = running(executor)
    wait_for(lambda: len(calls) == 20 and calls[5] == 3, 30, "retries")
    wait_committed(bootstrap_servers, group, topic, 20, "commit")
    run.stop()
    assert times[1] - times[0] >= 0.045 and times[2] - times[1] >= 0.095  # doubling backoff
    assert executor.stats()["retries"] == 2


@pytest.mark.integration
def test_stop_policy_commits_up_to_the_failed_record_and_raises(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    """Under 'stop', run() raises HandlerError, the commit stops right at the failed record and
    no later record of its lane is handled."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "stop", 200)
    handled = []

    def handler(record: Any) -> None:
        if record.offset == 120:
            raise ValueError("bad record")
        handled.append(record.offset)

    executor = ShardedExecutor(
        consumer_for(bootstrap_servers, topic, group), handler, max_attempts=2,
        retry_backoff_ms=10, failure_policy="stop",
    )
    with pytest.raises(HandlerError, match=r"@120 \('stop' policy\): ValueError") as info:
        executor.run()
    assert isinstance(info.value.__cause__, ValueError)
    assert committed(bootstrap_servers, group) == {TopicPartition(topic, 0): 120}
    assert sorted(handled) == list(range(120))  # nothing of its lane ran after the failure
    with pytest.raises(IllegalStateError, match="run\\(\\) may be called once"):
        executor.run()


@pytest.mark.integration
def test_dead_letter_policy_sends_record_with_headers(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """Under 'dead_letter', failed records go to the topic with error and source headers."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "src", 100, keys=5)
    dlq = unique_name("dlq")
    create_topic(bootstrap_servers, dlq)
    handled = []

    def handler(record: Any) -> None:
        if record.offset % 25 == 7:
            raise KeyError(record.offset)
        handled.append(record.offset)

    executor = ShardedExecutor(
        consumer_for(bootstrap_servers, topic, group), handler, max_attempts=2,
        retry_backoff_ms=1, failure_policy="dead_letter", dead_letter_topic=dlq,
        commit_interval_ms=0,
    )
    run = running(executor)
    wait_for(lambda: executor.stats().get("dead_lettered", 0) == 4, 30, "dead letters")
    wait_committed(bootstrap_servers, group, topic, 100, "commit past the dead letters")
    run.stop()
    assert len(handled) == 96
    reader = consumer_for(bootstrap_servers, dlq, unique_name("reader"))
    try:
        letters: list[Any] = []
        deadline = time.monotonic() + 30
        while len(letters) < 4 and time.monotonic() < deadline:
            for records in reader.poll(timeout_ms=500).values():
                letters.extend(records)
    finally:
        reader.close()
    assert sorted(int(r.value.decode().split(":")[1]) * 5 + int(r.key) for r in letters) == [
        7, 32, 57, 82
    ]
    for letter in letters:
        headers = dict(letter.headers)
        assert list(headers)[-5:] == list(DEAD_LETTER_HEADERS)
        assert headers["dead_letter.topic"] == topic.encode()
        assert headers["dead_letter.partition"] == b"0"
        assert headers["dead_letter.attempts"] == b"2"
        assert headers["dead_letter.error"].startswith(b"KeyError: ")
        assert int(headers["dead_letter.offset"]) % 25 == 7


@pytest.mark.integration
def test_dead_letters_are_the_stored_bytes_whatever_the_users_producer_serializes(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """A PriorityConsumer deserializing JSON and a user's KafkaProducer serializing JSON (what
    docs/executor.md suggests): the dead letter is the record's bytes as stored, not serialized
    again (which failed with a TypeError and stopped the executor), and the user's producer
    stays open."""
    from priority_kafka import PriorityConsumer

    logical, group, dlq = unique_name("json"), unique_name("g"), unique_name("dlq")
    for name in (f"{logical}-0", f"{logical}-1", dlq):
        create_topic(bootstrap_servers, name)
    sender = KafkaProducer(bootstrap_servers=bootstrap_servers)
    for i in range(10):
        sender.send(f"{logical}-1", json.dumps({"n": i}).encode())
    sender.flush()
    sender.close()
    users = KafkaProducer(
        bootstrap_servers=bootstrap_servers, value_serializer=lambda v: json.dumps(v).encode()
    )
    handled: list[int] = []

    def handler(record: Any) -> None:
        if record.value["n"] == 3:
            raise ValueError("poison")
        handled.append(record.value["n"])

    consumer = PriorityConsumer(
        logical, max_priority=2, bootstrap_servers=bootstrap_servers, group_id=group,
        enable_auto_commit=False, auto_offset_reset="earliest", value_deserializer=json.loads,
    )
    executor = ShardedExecutor(
        consumer, handler, max_attempts=1, failure_policy="dead_letter",
        dead_letter_topic=dlq, dead_letter_producer=users, commit_interval_ms=0,
    )
    run = running(executor)
    wait_for(lambda: executor.stats().get("dead_lettered", 0) == 1 and len(handled) == 9, 30,
             "the dead letter")
    run.stop()
    users.send(dlq, {"still": "open"}).get(10)  # the executor did not close it
    users.close()
    reader = consumer_for(bootstrap_servers, dlq, unique_name("reader"))
    try:
        letters: list[Any] = []
        wait_for(lambda: letters.extend(
            r for records in reader.poll(timeout_ms=500).values() for r in records
        ) or len(letters) >= 2, 30, "the letters")
    finally:
        reader.close()
    assert [letter.value for letter in letters] == [b'{"n": 3}', b'{"still": "open"}']


@pytest.mark.integration
def test_callback_policy_gets_record_error_and_attempts(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """Under 'callback', on_failure gets each failed record, its error and attempt count."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "cb", 50)
    failures = []

    def handler(record: Any) -> None:
        if record.offset in (3, 40):
            raise RuntimeError(f"no {record.offset}")

    executor = ShardedExecutor(
        consumer_for(bootstrap_servers, topic, group), handler, max_attempts=1,
        failure_policy="callback", commit_interval_ms=0,
        on_failure=lambda record, error, attempts: failures.append(
            (record.offset, str(error), attempts)
        ),
    )
    run = running(executor)
    wait_committed(bootstrap_servers, group, topic, 50, "commit")
    run.stop()
    assert sorted(failures) == [(3, "no 3", 1), (40, "no 40", 1)]


@pytest.mark.integration
def test_failing_callback_stops_without_committing_past_the_record(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    """If on_failure itself raises, the record is not done: run() raises, commit stays below."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "cbfail", 30)

    def handler(record: Any) -> None:
        if record.offset == 10:
            raise RuntimeError("handler")

    def on_failure(record: Any, error: BaseException, attempts: int) -> None:
        raise OSError("callback")

    executor = ShardedExecutor(
        consumer_for(bootstrap_servers, topic, group), handler, max_attempts=1,
        failure_policy="callback", on_failure=on_failure, ordering="partition",
    )
    with pytest.raises(HandlerError, match="OSError"):
        executor.run()
    assert committed(bootstrap_servers, group) == {TopicPartition(topic, 0): 10}


@pytest.mark.integration
def test_async_handler_keeps_key_order_and_concurrency_limit(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """An async def handler runs on the event loop, per key in order, at most N at once."""
    topic, group = loaded_topic(bootstrap_servers, unique_name, "async", 2000, keys=20)
    seen: dict[str, list[int]] = defaultdict(list)
    concurrent = [0, 0]
    threads = set()

    async def handler(record: Any) -> None:
        concurrent[0] += 1
        concurrent[1] = max(concurrent)
        threads.add(threading.get_ident())
        await asyncio.sleep(random.random() * 0.002)
        concurrent[0] -= 1
        note_sequence(seen, record)

    executor = ShardedExecutor(
        consumer_for(bootstrap_servers, topic, group), handler, shards=16, async_concurrency=5,
    )
    run_until_recorded(running, executor, seen, 2000, 60)
    assert all(values == list(range(100)) for values in seen.values())
    assert 1 < concurrent[1] <= 5
    assert len(threads) == 1  # all on the one event-loop thread


# -- through PriorityConsumer -------------------------------------------------------------------


def priority_consumer(bootstrap: str, topic: str, group: str, **configs: Any) -> Any:
    from priority_kafka import PriorityConsumer

    return PriorityConsumer(
        topic, max_priority=3, bootstrap_servers=bootstrap, group_id=group,
        enable_auto_commit=False, auto_offset_reset="earliest", **configs,
    )


def produce_levels(bootstrap: str, topic: str, counts: dict[int, int], keys: int = 10) -> None:
    """Produce ``counts[level]`` records to each level, key ``k`` carrying ``level:k:seq``."""
    from priority_kafka import PriorityProducer

    producer = PriorityProducer(max_priority=3, bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for level, count in counts.items():
            for i in range(count):
                key = i % keys
                producer.send(topic, key=str(key).encode(),
                              value=f"{level}:{key}:{i // keys}".encode(), priority=level)
        producer.flush()
    finally:
        producer.close()


@pytest.mark.integration
def test_priority_high_records_overtake_a_low_backlog_and_levels_get_their_share(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """With every level backlogged, handler time splits about 29/14/7; high-priority records
    sent later are handled long before the low backlog drains; per-key order holds per level."""
    from priority_kafka import create_priority_topics

    topic, group = unique_name("prio"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, 3)
    produce_levels(bootstrap_servers, topic, {0: 1500, 1: 1500, 2: 1500})
    busy: Counter[int] = Counter()
    seen: dict[tuple[int, str], list[int]] = defaultdict(list)
    lock = threading.Lock()

    def handler(record: Any) -> None:
        start = time.perf_counter()
        time.sleep(0.003)
        level, key, seq = record.value.decode().split(":")
        with lock:
            busy[int(level)] += time.perf_counter() - start
            seen[(int(level), key)].append(int(seq))

    executor = ShardedExecutor(
        priority_consumer(bootstrap_servers, topic, group, max_poll_records=50), handler,
        shards=4, max_in_flight_per_partition=300,
    )
    run = running(executor)
    # Each level's group joins on its own: measure once all run, while all are backlogged.
    wait_for(lambda: all(busy[level] for level in (2, 1, 0)), 60, "every level to start")
    with lock:
        before, start = Counter(busy), sum(map(len, seen.values()))
    wait_for(lambda: sum(map(len, seen.values())) >= start + 1200, 60, "1200 more records")
    with lock:
        used = {level: busy[level] - before[level] for level in (2, 1, 0)}
    shares = {level: spent / sum(used.values()) for level, spent in used.items()}
    print(f"level shares while backlogged: {shares}")
    assert shares[2] == pytest.approx(29 / 50, abs=0.1)
    assert shares[1] == pytest.approx(14 / 50, abs=0.08)
    assert shares[0] == pytest.approx(7 / 50, abs=0.06)
    wait_for(lambda: sum(map(len, seen.values())) >= 4500, 120, "all records")
    run.stop()
    assert all(values == list(range(150)) for values in seen.values())


@pytest.mark.integration
def test_priority_latency_under_low_priority_saturation(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """High-priority records produced while a low-priority backlog saturates the workers start
    within a fraction of the time the backlog takes."""
    from priority_kafka import PriorityProducer, create_priority_topics

    topic, group = unique_name("lat"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, 3)
    produce_levels(bootstrap_servers, topic, {0: 3000}, keys=100)
    latencies: list[float] = []
    low_done = [0]

    def handler(record: Any) -> None:
        if record.topic.endswith("-2"):
            latencies.append(time.time() - float(record.value.decode()))
        else:
            low_done[0] += 1
        time.sleep(0.005)

    executor = ShardedExecutor(
        priority_consumer(bootstrap_servers, topic, group), handler, shards=4,
        max_in_flight_per_partition=500,
    )
    run = running(executor)
    wait_for(lambda: low_done[0] >= 100, 60, "the low backlog to start")
    producer = PriorityProducer(max_priority=3, bootstrap_servers=bootstrap_servers)
    try:
        for _ in range(20):
            producer.send(topic, value=str(time.time()).encode(), priority=2)
            producer.flush()
            time.sleep(0.05)
    finally:
        producer.close()
    wait_for(lambda: len(latencies) == 20, 60, "the high-priority records")
    backlog_left = 3000 - low_done[0]
    run.stop()
    latencies.sort()
    print(f"high-priority latency p50 {latencies[10] * 1000:.0f} ms, max "
          f"{latencies[-1] * 1000:.0f} ms; low backlog left {backlog_left}")
    assert backlog_left > 1000  # the high records did not wait for the backlog (~3.7 s of it)
    assert latencies[10] < 1.0


@pytest.mark.integration
def test_priority_member_joining_and_leaving_loses_nothing(
    bootstrap_servers: str,
    unique_name: Callable[[str], str],
    running: Callable[..., Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Through PriorityConsumer, a second executor joins and leaves: every record handled once
    at least, no commit fails."""
    from priority_kafka import create_priority_topics

    topic, group = unique_name("prb"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, 3, num_partitions=2)
    counts = {0: 1500, 1: 1500, 2: 1500}
    produce_levels(bootstrap_servers, topic, counts)
    handled: Counter[str] = Counter()
    lock = threading.Lock()

    def handler(record: Any) -> None:
        time.sleep(0.005)
        with lock:
            handled[record.value.decode()] += 1

    def executor() -> ShardedExecutor:
        return ShardedExecutor(
            priority_consumer(bootstrap_servers, topic, group, max_poll_records=70), handler,
            shards=4, commit_interval_ms=100, max_in_flight_per_partition=150,
        )

    join_and_leave(executor, handled, 4500, running, caplog)


@pytest.mark.integration
def test_an_undeserializable_record_is_dead_lettered_raw_and_the_rest_flows(
    bootstrap_servers: str, unique_name: Callable[[str], str], running: Callable[..., Running]
) -> None:
    """A value the deserializer rejects goes to the dead-letter topic as raw bytes with the
    usual headers; every other record of every level is handled and committed past it."""
    from priority_kafka import PriorityProducer, create_priority_topics

    topic, group, dlq = unique_name("orders"), unique_name("g"), unique_name("dlq")
    create_priority_topics(bootstrap_servers, topic, max_priority=3, num_partitions=1)
    create_topic(bootstrap_servers, dlq)
    with PriorityProducer(max_priority=3, bootstrap_servers=bootstrap_servers) as producer:
        for i in range(30):
            value = b"{not json" if i == 13 else str(i).encode()
            producer.send(topic, value=value, priority=i % 3)
    handled: list[Any] = []
    executor = ShardedExecutor(
        priority_consumer(bootstrap_servers, topic, group, value_deserializer=json.loads),
        lambda record: handled.append(record.value), failure_policy="dead_letter",
        dead_letter_topic=dlq, commit_interval_ms=0,
    )
    run = running(executor)
    wait_for(lambda: len(handled) == 29, 60, "every good record")
    wait_committed(bootstrap_servers, f"{group}-1", f"{topic}-1", 10, "commit past the bad one")
    run.stop()
    assert sorted(handled) == [i for i in range(30) if i != 13]
    reader = consumer_for(bootstrap_servers, dlq, unique_name("reader"))
    try:
        letters: list[Any] = []
        deadline = time.monotonic() + 30
        while not letters and time.monotonic() < deadline:
            for records in reader.poll(timeout_ms=500).values():
                letters.extend(records)
    finally:
        reader.close()
    assert [r.value for r in letters] == [b"{not json"]
    headers = dict(letters[0].headers)
    assert headers["dead_letter.topic"] == f"{topic}-1".encode()
    assert headers["dead_letter.offset"] == b"4"
    assert headers["dead_letter.error"].startswith(b"DeserializationError: ")
