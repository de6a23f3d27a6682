"""Fault: poison records on a 3-level topic, a value the deserializer rejects and values the
handler always fails on, under each failure policy: 'stop' commits nothing past the first
unprocessed record, 'dead_letter' sends them raw with their headers and the rest flows,
'callback' gets each of them once and the rest flows.

Single-level variants with their own assertions live in tests/test_executor.py
(test_stop_policy_commits_up_to_the_failed_record_and_raises,
test_dead_letter_policy_sends_record_with_headers, test_callback_policy_gets_record_error_and_
attempts, test_failing_callback_stops_without_committing_past_the_record,
test_an_undeserializable_record_is_dead_lettered_raw_and_the_rest_flows)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from benchmarks._running import Running, wait_for
from benchmarks._traffic import LEVELS
from priority_kafka import PriorityProducer, create_priority_topics
from priority_kafka.errors import HandlerError
from priority_kafka.executor import DEAD_LETTER_HEADERS, ShardedExecutor
from tests.test_executor import committed, consumer_for, create_topic, priority_consumer

pytestmark = [pytest.mark.faults, pytest.mark.integration]

COUNT = 60
UNDESERIALIZABLE = 13  # level 1, offset 4
HANDLER_FAILS = (20, 31)  # level 2 offset 6, level 1 offset 10
POISON = {(1, 4), (2, 6), (1, 10)}  # (level, offset)


def read_all(bootstrap: str, topic: str, expected: int, group: str) -> list[Any]:
    reader = consumer_for(bootstrap, topic, group)
    letters: list[Any] = []
    try:
        wait_for(lambda: bool(letters.extend(
            r for rs in reader.poll(timeout_ms=200).values() for r in rs
        )) or len(letters) >= expected, 30, "dead letters")
    finally:
        reader.close()
    return letters


@pytest.mark.parametrize("policy", ["stop", "dead_letter", "callback"])
def test_poison_records_under_each_failure_policy(
    bootstrap_servers: str, unique_name: Callable[[str], str], policy: str, fault_report: Any
) -> None:
    """Nothing is committed past a poison record its policy did not finish; dead letters carry
    the raw bytes and the source headers; the callback sees each poison record once."""
    topic, group, dlq = unique_name("poison"), unique_name("g"), unique_name("dlq")
    create_priority_topics(bootstrap_servers, topic, LEVELS)
    create_topic(bootstrap_servers, dlq)
    with PriorityProducer(max_priority=LEVELS, bootstrap_servers=bootstrap_servers) as producer:
        for i in range(COUNT):
            value = b"{not json" if i == UNDESERIALIZABLE else str(i).encode()
            producer.send(topic, value=value, priority=i % LEVELS, headers=[("n", b"%d" % i)])
    handled: list[int] = []
    failures: list[tuple[str, int, str]] = []
    lock = threading.Lock()

    def handler(record: Any) -> None:
        if record.value in HANDLER_FAILS:
            raise RuntimeError(f"cannot handle {record.value}")
        with lock:
            handled.append(record.value)

    def on_failure(record: Any, error: BaseException, attempts: int) -> None:
        failures.append((record.topic, record.offset, type(error).__name__))

    # The executor's own dead-letter producer: a handler's failed record holds the
    # deserialized value, and the dead letter carries the bytes as stored.
    executor = ShardedExecutor(
        priority_consumer(bootstrap_servers, topic, group, value_deserializer=json.loads),
        handler, failure_policy=policy, max_attempts=2, retry_backoff_ms=1, commit_interval_ms=0,
        dead_letter_topic=dlq if policy == "dead_letter" else None,
        on_failure=on_failure if policy == "callback" else None,
    )
    run = Running(executor)
    good = [i for i in range(COUNT) if i != UNDESERIALIZABLE and i not in HANDLER_FAILS]
    ends = {level: COUNT // LEVELS for level in range(LEVELS)}
    if policy == "stop":
        run.thread.join(60)
        assert isinstance(run.error, HandlerError)
        offsets = {}
        for level in range(LEVELS):
            tp = TopicPartition(f"{topic}-{level}", 0)
            offsets[level] = committed(bootstrap_servers, f"{group}-{level}").get(tp, 0)
            first_poison = min([o for lv, o in POISON if lv == level], default=ends[level])
            assert offsets[level] <= first_poison  # nothing committed past an unprocessed one
        outcome = {"stopped_at": f"{run.error.topic}@{run.error.offset}", "committed": offsets}
    else:
        def all_committed() -> bool:
            with contextlib.suppress(KafkaError):  # the group coordinator may still be loading
                return all(
                    committed(bootstrap_servers, f"{group}-{level}").get(
                        TopicPartition(f"{topic}-{level}", 0)) == ends[level]
                    for level in range(LEVELS)
                )
            return False

        wait_for(all_committed, 60, "commits past every poison record")
        run.stop()
        assert run.error is None
        assert sorted(handled) == good
        if policy == "dead_letter":
            letters = read_all(bootstrap_servers, dlq, 3, unique_name("reader"))
            assert sorted(r.value for r in letters) == [b"20", b"31", b"{not json"]
            for letter in letters:
                headers = dict(letter.headers)
                assert headers["n"] == letter.value if letter.value != b"{not json" else b"13"
                assert list(headers)[-5:] == list(DEAD_LETTER_HEADERS)
                expected = (b"DeserializationError" if letter.value == b"{not json"
                            else b"RuntimeError")
                assert headers["dead_letter.error"].startswith(expected)
            outcome = {"dead_lettered": len(letters)}
        else:
            assert sorted(failures) == sorted([
                (f"{topic}-1", 4, "DeserializationError"), (f"{topic}-1", 10, "RuntimeError"),
                (f"{topic}-2", 6, "RuntimeError"),
            ])
            outcome = {"callbacks": len(failures)}
    fault_report(f"poison records, failure_policy={policy!r}", produced=COUNT,
                 poison=len(POISON), handled=len(handled), lost=0, **outcome)
