"""The fetcher waker of the confluent PriorityConsumer (priority_kafka.confluent._waking). What
the wake buys after a rebalance is measured by ``benchmarks.churn`` (docs/rebalancing.md)."""

from __future__ import annotations

import threading
import time

from confluent_kafka import TopicPartition

from priority_kafka.confluent._waking import FetcherWaker


def test_the_waker_wakes_off_the_calling_thread_and_stops_on_close() -> None:
    """wake() returns at once, even while a wake is held up, and the wake runs on the waker's
    thread, the latest partitions of a consumer replacing those not woken yet; after close()
    nothing runs and the thread is gone."""
    calls: list[tuple[str, list[int]]] = []
    release = threading.Event()

    class Slow:  # a consumer whose leaders answer only when released
        def offsets_for_times(self, partitions: list[TopicPartition], timeout: float) -> None:
            calls.append((threading.current_thread().name, [tp.partition for tp in partitions]))
            release.wait(5)

    waker = FetcherWaker("test-waker")
    slow = Slow()

    def wait_calls(count: int) -> None:
        deadline = time.monotonic() + 5
        while len(calls) < count:
            assert time.monotonic() < deadline, calls
            time.sleep(0.01)

    waker.wake(slow, [TopicPartition("t", 0)])
    wait_calls(1)  # the waker's thread is in that wake, held
    started = time.monotonic()
    waker.wake(slow, [TopicPartition("t", 1)])
    waker.wake(slow, [TopicPartition("t", 2)])  # replaces partition 1's, not woken yet
    assert time.monotonic() - started < 0.5
    release.set()
    wait_calls(2)
    waker.close()
    waker.wake(slow, [TopicPartition("t", 3)])
    time.sleep(0.1)
    assert calls == [("test-waker", [0]), ("test-waker", [2])]
    assert not any(thread.name == "test-waker" for thread in threading.enumerate())


def test_a_wake_for_a_consumer_closed_meanwhile_is_skipped_and_the_waker_goes_on() -> None:
    """A level renewed between the wake's request and its turn closes the consumer it was
    for: its offsets_for_times raises RuntimeError("Consumer closed"), which had ended the
    waker's thread (and every later wake) in the soak."""
    from confluent_kafka import Consumer

    closed = Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g"})
    closed.close()
    woken = threading.Event()

    class Live:
        def offsets_for_times(self, partitions: list[TopicPartition], timeout: float) -> None:
            woken.set()

    waker = FetcherWaker("test-waker")
    try:
        waker.wake(closed, [TopicPartition("t", 0)])
        deadline = time.monotonic() + 5
        while waker._waiting and time.monotonic() < deadline:
            time.sleep(0.01)
        waker.wake(Live(), [TopicPartition("t", 1)])
        assert woken.wait(5), "the waker's thread ended with the closed consumer's wake"
    finally:
        waker.close()
