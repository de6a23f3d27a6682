"""SASL/SCRAM: the local broker's SASL_PLAINTEXT SCRAM-SHA-512 listener, used by
PriorityProducer, PriorityConsumer and ShardedExecutor with the right credentials; with wrong
ones the client gives up after its bootstrap timeout (not fast, and not naming the cause: a
kafka-python limitation this library does not work around yet), and the password shows up in
no error, log line or repr."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from priority_kafka import PriorityConsumer, PriorityProducer, create_priority_topics
from priority_kafka.executor import ShardedExecutor
from priority_kafka.testing import LocalKafkaBroker
from tests.test_executor import Running, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.integration]

PASSWORD = "pw-9f3a-secret"


@pytest.fixture(scope="module")
def scram_broker() -> Iterator[LocalKafkaBroker]:
    with LocalKafkaBroker(scram_users={"alice": PASSWORD}) as broker:
        yield broker


def credentials(broker: LocalKafkaBroker, password: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": broker.sasl_bootstrap_servers,
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice", "sasl_plain_password": password,
    }


def test_scram_credentials_work_end_to_end(scram_broker: LocalKafkaBroker) -> None:
    """With the right SCRAM-SHA-512 credentials, records go through PriorityProducer and a
    ShardedExecutor over a PriorityConsumer; no repr shows the password."""
    right = credentials(scram_broker, PASSWORD)
    admin = KafkaAdminClient(**right)
    try:
        create_priority_topics(admin, "sasl", 3)
    finally:
        admin.close()
    with PriorityProducer(max_priority=3, **right) as producer:
        for i in range(30):
            producer.send("sasl", value=b"%d" % i, priority=i % 3)
        assert PASSWORD not in repr(producer)
    handled: list[bytes] = []
    lock = threading.Lock()

    def handler(record: Any) -> None:
        with lock:
            handled.append(record.value)

    consumer = PriorityConsumer("sasl", max_priority=3, group_id="sasl-g",
                                enable_auto_commit=False, auto_offset_reset="earliest", **right)
    executor = ShardedExecutor(consumer, handler)
    assert PASSWORD not in repr(consumer) + repr(executor)
    run = Running(executor)
    wait_for(lambda: len(handled) == 30, 60, "every record")
    run.stop()
    assert run.error is None and sorted(handled) == sorted(b"%d" % i for i in range(30))


def test_wrong_scram_password_fails_without_showing_it(
    scram_broker: LocalKafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """A wrong password makes the client give up after bootstrap_timeout_ms (kafka-python
    3.0.12 says "Unable to bootstrap", and names the authentication failure only in some
    log lines); neither the error nor any log line holds a password."""
    caplog.set_level(logging.DEBUG)
    wrong_password = "wrong-7c1e-secret"
    with pytest.raises(KafkaError) as info:
        PriorityProducer(max_priority=3, bootstrap_timeout_ms=3000,
                         **credentials(scram_broker, wrong_password)).send("sasl", b"x").get(10)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "Unable to bootstrap" in str(info.value)
    for secret in (wrong_password, PASSWORD):
        assert secret not in str(info.value) and secret not in logged


def test_the_executors_own_dead_letter_producer_connects_like_the_consumer(
    scram_broker: LocalKafkaBroker,
) -> None:
    """Under 'dead_letter' without a dead_letter_producer, the executor's own producer uses the
    consumer's security settings, so dead letters reach a SASL-only listener."""
    right = credentials(scram_broker, PASSWORD)
    admin = KafkaAdminClient(**right)
    try:
        create_priority_topics(admin, "sasl-dl", 3)
        create_priority_topics(admin, "sasl-dlq", 1)
    finally:
        admin.close()
    with PriorityProducer(max_priority=3, **right) as producer:
        for i in range(6):
            producer.send("sasl-dl", value=b"%d" % i, priority=i % 3)

    def handler(record: Any) -> None:
        if record.value == b"4":
            raise ValueError("poison")

    consumer = PriorityConsumer("sasl-dl", max_priority=3, group_id="sasl-dl-g",
                                enable_auto_commit=False, auto_offset_reset="earliest", **right)
    executor = ShardedExecutor(consumer, handler, failure_policy="dead_letter",
                               dead_letter_topic="sasl-dlq-0", max_attempts=1)
    run = Running(executor)
    wait_for(lambda: executor.stats().dead_lettered == 1 or run.error is not None, 60,
             "the dead letter")
    run.stop()
    assert run.error is None
