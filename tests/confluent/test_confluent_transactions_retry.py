"""The confluent transactional calls' retry (confluent._transactions._retrying): a retriable
error is retried after a growing pause, each retry named in a warning; any other error is
raised at once."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from priority_kafka.confluent import _transactions


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
        _transactions._retrying("commit_transaction", failing([retriable] * 7))
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
        _transactions._retrying("send_offsets_to_transaction", failing([error]))
    assert raised.value.args[0] is error
