"""SASL/SCRAM: the local broker's SASL_PLAINTEXT SCRAM-SHA-512 listener, used by
PriorityProducer, PriorityConsumer and ShardedExecutor with the right credentials; with wrong
ones the client fails at once with kafka-python's SaslAuthenticationFailedError naming the
broker's reason (kafka-python alone retries until its bootstrap timeout: AUTH_FAILURE_NOT_CACHED),
and the password shows up in no error, log line, metric or repr. The Spark source reads over
SASL with both clients."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError, SaslAuthenticationFailedError

from benchmarks._running import Running, wait_for
from priority_kafka import PriorityConsumer, PriorityProducer, create_priority_topics
from priority_kafka.executor import ShardedExecutor
from priority_kafka.families import family as registered
from priority_kafka.kafka_python._kafka import AUTH_FAILURE_NOT_CACHED
from priority_kafka.testing import LocalKafkaBroker
from tests.conftest import over_families

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
    figures = f"{consumer.metrics()} {executor.stats()}"
    run.stop()
    assert run.error is None and sorted(handled) == sorted(b"%d" % i for i in range(30))
    assert PASSWORD not in figures


@pytest.mark.parametrize("client", ["producer", "consumer"])
def test_wrong_scram_password_fails_fast_without_showing_it(
    scram_broker: LocalKafkaBroker, caplog: pytest.LogCaptureFixture, client: str
) -> None:
    """A wrong password fails at construction within seconds, with kafka-python's own
    SaslAuthenticationFailedError carrying the broker's reason (AUTH_FAILURE_NOT_CACHED: alone,
    kafka-python retries until bootstrap_timeout_ms, 30 s by default, and says "Unable to
    bootstrap"); neither the error nor any log line holds a password."""
    caplog.set_level(logging.DEBUG)
    wrong_password = "wrong-7c1e-secret"
    wrong = credentials(scram_broker, wrong_password)
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError) as info:
        if client == "producer":
            PriorityProducer(max_priority=3, **wrong)
        else:
            PriorityConsumer("sasl", max_priority=3, group_id="sasl-wrong", **wrong)
    elapsed = time.monotonic() - started
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert elapsed < 10, f"{elapsed:.1f} s"
    assert "invalid credentials" in str(info.value)
    for secret in (wrong_password, PASSWORD):
        assert secret not in str(info.value) and secret not in logged


def test_kafka_python_alone_retries_a_wrong_password_until_its_bootstrap_timeout(
    scram_broker: LocalKafkaBroker,
) -> None:
    """AUTH_FAILURE_NOT_CACHED is what the installed kafka-python does: a plain KafkaProducer
    with a wrong password gives up only at bootstrap_timeout_ms, saying "Unable to bootstrap".
    When a release fixes it, this fails: bound the flag and drop AuthFailFastClient."""
    started = time.monotonic()
    with pytest.raises(KafkaError) as info:
        KafkaProducer(bootstrap_timeout_ms=3000, **credentials(scram_broker, "wrong-secret"))
    slow = time.monotonic() - started >= 2.5 and "Unable to bootstrap" in str(info.value)
    assert slow == AUTH_FAILURE_NOT_CACHED, info.value


def spark_read(spark: Any, broker: LocalKafkaBroker, password: str, client: str) -> Any:
    options = {
        "kafka.bootstrap.servers": broker.sasl_bootstrap_servers,
        "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.plain.username": "alice", "kafka.sasl.plain.password": password,
        "subscribe": "sasl-spark", "maxPriority": "3", "client": client,
    }
    return spark.read.format("priority_kafka").options(**options).load()


@pytest.mark.spark
@over_families("spark_reader", "tls_files", argname="client")
def test_the_spark_source_reads_over_scram_and_fails_fast_on_a_wrong_password(
    scram_broker: LocalKafkaBroker, spark: Any, client: str
) -> None:
    """The Spark source reads a priority topic over SASL/SCRAM with either client (the
    ``kafka.sasl.*`` options, mapped to librdkafka's names for confluent); with a wrong
    password the read fails within seconds, naming the authentication failure, not the
    password."""
    right = credentials(scram_broker, PASSWORD)
    admin = KafkaAdminClient(**right)
    try:
        if "sasl-spark-0" not in admin.list_topics():
            create_priority_topics(admin, "sasl-spark", 3)
            with PriorityProducer(max_priority=3, **right) as producer:
                for i in range(30):
                    producer.send("sasl-spark", value=b"%d" % i, priority=i % 3)
    finally:
        admin.close()
    rows = spark_read(spark, scram_broker, PASSWORD, client).collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(b"%d" % i for i in range(30))
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        spark_read(spark, scram_broker, "wrong-5d2b-secret", client).collect()
    assert time.monotonic() - started < 15  # the driver's requests time out after 30 s
    # Each client's own name for it: kafka-python's error class, librdkafka's message.
    named = ("SaslAuthenticationFailedError",
             "SASL authentication error: Authentication failed")[registered(client).librdkafka]
    assert named in str(info.value)
    assert "wrong-5d2b-secret" not in str(info.value) and PASSWORD not in str(info.value)


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


def librdkafka_credentials(password: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": password,
    }


def confluent_executor(broker: LocalKafkaBroker, password: str, handler: Any, **config: Any) -> Any:
    from tests.confluent.helpers import consumer

    executor = ShardedExecutor(consumer(
        broker.sasl_bootstrap_servers, "sasl-cf",
        **{**librdkafka_credentials(password), "enable.auto.commit": False, **config},
    ), handler)
    executor.subscribe(["sasl-cf"])
    return executor


def test_the_executor_on_confluent_reads_over_scram_and_stops_on_a_wrong_password(
    scram_broker: LocalKafkaBroker,
) -> None:
    """With the right credentials a ShardedExecutor on the confluent PriorityConsumer handles
    every record; with a wrong one it stops within seconds with librdkafka's authentication
    error (a bare Consumer retries a refused login for ever and tells only error_cb, which is
    still called), instead of sitting there; no error shows the password."""
    from confluent_kafka import KafkaError, KafkaException

    from priority_kafka.confluent import PriorityProducer as ConfluentPriorityProducer

    admin = KafkaAdminClient(**credentials(scram_broker, PASSWORD))
    try:
        create_priority_topics(admin, "sasl-cf", 3)
    finally:
        admin.close()
    producer = ConfluentPriorityProducer({
        "bootstrap.servers": scram_broker.sasl_bootstrap_servers, "max.priority": 3,
        **librdkafka_credentials(PASSWORD),
    })
    for i in range(30):
        producer.produce("sasl-cf", value=b"%d" % i, priority=i % 3)
    assert producer.flush(30) == 0
    handled: list[bytes] = []
    right = Running(confluent_executor(scram_broker, PASSWORD, lambda r: handled.append(r.value)))
    wait_for(lambda: len(handled) == 30 or right.error is not None, 60, "every record")
    right.stop()
    assert right.error is None and sorted(handled) == sorted(b"%d" % i for i in range(30))

    wrong_password = "wrong-3e8d-secret"
    told: list[KafkaError] = []
    started = time.monotonic()
    raised: BaseException | None
    try:  # subscribe() asks the broker for the levels: the refusal may come there already
        wrong = Running(confluent_executor(scram_broker, wrong_password, handled.append,
                                           error_cb=told.append))
    except KafkaException as exc:
        raised = exc
    else:
        wait_for(lambda: wrong.error is not None, 20, "the executor to stop")
        wrong.stop()
        raised = wrong.error
    elapsed = time.monotonic() - started
    assert isinstance(raised, KafkaException), repr(raised)
    error = raised.args[0]
    assert error.code() == KafkaError._AUTHENTICATION and "invalid credentials" in error.str()
    assert any(e.code() == KafkaError._AUTHENTICATION for e in told)  # the caller's error_cb
    assert elapsed < 15, f"{elapsed:.1f} s"
    for secret in (wrong_password, PASSWORD):
        assert secret not in str(raised)
