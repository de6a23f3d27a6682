"""Unit tests for priority_kafka.confluent._login: a refused SASL login told apart from one cut."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from priority_kafka.confluent._login import LoginWatch

REFUSED = KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials")


def test_a_client_refused_twice_without_a_clear_counts_as_refused() -> None:
    """One authentication error per client (a handshake cut short, as every level's is when a
    broker restarts) passes; a second of the same client raises the last one, unless a clear
    (a message came, a new call began) came between them. Other errors do not count, and every
    error reaches the caller's own callback."""
    told: list[KafkaError] = []
    watch = LoginWatch(told.append)
    first, second = watch.error_cb(), watch.error_cb()
    first(REFUSED)
    second(REFUSED)
    first(KafkaError(KafkaError._TRANSPORT))
    watch.check()
    watch.clear()
    first(REFUSED)
    watch.check()
    first(REFUSED)
    with pytest.raises(KafkaException) as info:
        watch.check()
    assert info.value.args[0].code() == KafkaError._AUTHENTICATION
    assert [e.code() for e in told].count(KafkaError._AUTHENTICATION) == 4 and len(told) == 5
