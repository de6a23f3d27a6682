"""The confluent transactional calls' retry (confluent._transactions._retrying): a retriable
error is retried after a growing pause, each retry named in a warning; any other error is
raised at once. A call that does not return within its limit raises TimeoutError, and the
stuck producer is not called again nor waited for."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from priority_kafka.confluent import _transactions
from priority_kafka.confluent._transactions import ConfluentTransactions


def failing(errors: list[KafkaError]) -> Any:
    def call() -> None:
        if errors:
            raise KafkaException(errors.pop(0))

    return call


def test_a_retriable_error_is_retried_after_a_growing_pause_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(_transactions.time, "sleep", pauses.append)
    retriable = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "loading", retriable=True)
    with caplog.at_level(logging.WARNING):
        _transactions._retrying("commit_transaction", failing([retriable] * 7), 60)
    assert pauses == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert caplog.messages[0] == "commit_transaction failed, retrying in 0.05 s: loading"
    assert len(caplog.messages) == 7


@pytest.mark.parametrize("flags", [{}, {"retriable": True, "txn_requires_abort": True},
                                   {"retriable": True, "fatal": True}])
def test_an_error_not_only_retriable_is_raised_at_once(
    monkeypatch: pytest.MonkeyPatch, flags: dict[str, bool]
) -> None:
    monkeypatch.setattr(_transactions.time, "sleep", pytest.fail)
    error = KafkaError(KafkaError.INVALID_TXN_STATE, "no", **flags)
    with pytest.raises(KafkaException) as raised:
        _transactions._retrying("send_offsets_to_transaction", failing([error]), 60)
    assert raised.value.args[0] is error


class StuckProducer(Producer):  # type: ignore[misc]
    """A producer whose commit never returns until ``release`` (a handle that lost every
    broker, librdkafka #5301), counting the calls that reach it."""

    def __init__(self) -> None:
        super().__init__({"bootstrap.servers": "127.0.0.1:9", "transactional.id": "stuck"})
        self.release = threading.Event()
        self.closing = threading.Event()
        self.calls: list[str] = []

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append(f"commit {timeout:g}")
        self.release.wait()

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")

    def close(self) -> None:  # as a stuck handle's close: it waits on the stuck call
        self.closing.set()
        self.release.wait()


def test_a_stuck_call_raises_timeout_and_the_producer_is_neither_called_nor_waited_for_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    producer = StuckProducer()
    sender = ConfluentTransactions(producer, owned=True, limit_s=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match=r"^commit_transaction: the transactional "
                           r"producer did not return within 0.3 s"):
            sender.commit()
        assert 0.3 <= time.monotonic() - started < 5
        with pytest.raises(TimeoutError, match=r"^abort_transaction: .* has not returned"):
            sender.abort()
        with caplog.at_level(logging.WARNING):
            started = time.monotonic()
            sender.close()
            assert time.monotonic() - started < 0.3  # not waited for
        assert producer.closing.wait(5)  # on its own thread, left to finish
        assert producer.calls == ["commit 0.3"]
        assert "the transactional producer did not close within 0 s" in caplog.text
    finally:
        producer.release.set()


class QueuedAbortProducer(StuckProducer):
    """A producer whose abort comes back timed out every time (librdkafka keeps the request
    queued for a transaction coordinator it lost: "retry call to resume")."""

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")
        time.sleep(min(timeout, 0.1))
        raise KafkaException(KafkaError(
            KafkaError._TIMED_OUT, "Timed out waiting for operation to finish, retry call to "
            "resume", retriable=True))


def test_an_abort_that_keeps_timing_out_gives_up_within_the_limit_and_is_not_waited_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The soak's 6-minute stall: an abort retried for 300 s, then a close waited 60 s. Now
    the retries end within the limit (``commit_timeout_ms``) and the producer, whose close
    would abort first and block as the abort did, is closed in the background."""
    producer = QueuedAbortProducer()
    sender = ConfluentTransactions(producer, owned=True, limit_s=0.6)
    try:
        started = time.monotonic()
        with caplog.at_level(logging.WARNING), pytest.raises(KafkaException, match="resume"):
            sender.abort()
        assert 0.6 <= time.monotonic() - started < 3
        assert len(producer.calls) >= 3 and set(producer.calls) == {"abort"}
        assert "abort_transaction failed, retrying in 0.05 s" in caplog.text
        started = time.monotonic()
        sender.close()
        assert time.monotonic() - started < 0.3
        assert producer.closing.wait(5)
    finally:
        producer.release.set()
