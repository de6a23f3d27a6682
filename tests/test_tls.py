"""TLS: both client families over SSL, mutual TLS and SASL_SSL (SCRAM and PLAIN) against a real
broker with generated certificates; every misconfiguration fails fast naming its cause, and no
secret shows in an error, a repr or the broker's log."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from priority_kafka import create_priority_topics
from priority_kafka.families import KAFKA_PYTHON, Family
from priority_kafka.testing import LocalKafkaBroker, TlsFiles, generate_tls
from tests.conftest import over_families

pytestmark = pytest.mark.integration

PASSWORD = "tls-test-s3cret"
MODES = ["SSL", "MTLS", "SASL_SSL/SCRAM-SHA-512", "SASL_SSL/PLAIN"]
FAIL_FAST_S = 10.0


@pytest.fixture(scope="module")
def tls_broker() -> Iterator[LocalKafkaBroker]:
    """A broker of this module with the SSL, MTLS and SASL_SSL listeners."""
    with LocalKafkaBroker(tls=True, scram_users={"alice": PASSWORD}) as broker:
        yield broker


@pytest.fixture(scope="module")
def foreign(tmp_path_factory) -> TlsFiles:
    """Another CA and a client certificate it signed: neither trusted by the broker's."""
    return generate_tls(tmp_path_factory.mktemp("foreign"))


def settings(family: Family, broker: LocalKafkaBroker, mode: str, *, ca: TlsFiles | None = None,
             client: TlsFiles | None = None, key_password: str | None = None,
             password: str = PASSWORD) -> dict[str, Any]:
    """The client settings of ``mode`` in ``family``'s own names (kafka-python's, through the
    registry's one translation)."""
    listener, _, mechanism = mode.partition("/")
    tls, client = broker.tls, client or broker.tls
    key_password = key_password or client.client_key_password
    security: dict[str, Any] = {
        "security_protocol": "SASL_SSL" if mechanism else "SSL",
        "ssl_cafile": str((ca or tls).ca_file),
    }
    if listener == "MTLS":
        security.update({
            "ssl_certfile": str(client.client_cert_file),
            "ssl_keyfile": str(client.client_key_file),
            "ssl_password": key_password,
        })
    if mechanism:
        security.update({
            "sasl_mechanism": mechanism,
            "sasl_plain_username": "alice",
            "sasl_plain_password": password,
        })
    return {
        **family.spell({"bootstrap.servers": broker.listener(listener)}),
        **family.settings_of(security, KAFKA_PYTHON.key_style),
    }


def produce_and_consume(family: Family, config: dict[str, Any], topic: str) -> list[bytes]:
    """One record per level through the family's PriorityProducer and PriorityConsumer;
    the values read, highest level first as served."""
    deadline = time.monotonic() + 60
    if not family.librdkafka:
        from priority_kafka import PriorityConsumer, PriorityProducer

        with PriorityProducer(max_priority=3, **config) as producer:
            for level in range(3):
                producer.send(topic, f"{level}".encode(), priority=level).get(30)
        consumer = PriorityConsumer(topic, max_priority=3, group_id=f"{topic}-g",
                                    auto_offset_reset="earliest", **config)
        values: list[bytes] = []
        try:
            while len(values) < 3 and time.monotonic() < deadline:
                values += [r.value for rs in consumer.poll(timeout_ms=500).values() for r in rs]
        finally:
            consumer.close()
        return values
    from priority_kafka.confluent import PriorityConsumer as CConsumer
    from priority_kafka.confluent import PriorityProducer as CProducer

    cproducer = CProducer({**config, "max.priority": 3})
    for level in range(3):
        cproducer.produce(topic, f"{level}".encode(), priority=level)
    assert cproducer.flush(30) == 0
    cconsumer = CConsumer({**config, "max.priority": 3, "group.id": f"{topic}-g",
                           "auto.offset.reset": "earliest"})
    cconsumer.subscribe([topic])
    cvalues: list[bytes] = []
    try:
        while len(cvalues) < 3 and time.monotonic() < deadline:
            cvalues += [m.value() for m in cconsumer.consume(10, 0.5)]
    finally:
        cconsumer.close()
    return cvalues


@pytest.mark.parametrize("mode", MODES)
@over_families("tls_files")
def test_each_family_writes_and_reads_over_each_tls_mode(tls_broker, family, mode, unique_name):
    """The producer and the consumer of each family connect over SSL, mutual TLS and SASL_SSL
    (SCRAM-SHA-512 and PLAIN) with the generated CA and client certificate."""
    topic = unique_name("tls")
    create_priority_topics(tls_broker.bootstrap_servers, topic, 3)
    values = produce_and_consume(family, settings(family, tls_broker, mode), topic)
    assert sorted(values) == [b"0", b"1", b"2"]


def first_failure(
    family: Family, config: dict[str, Any], topic: str
) -> tuple[BaseException, float]:
    """The error a consumer of ``family`` with ``config`` raises, and after how many seconds."""
    start = time.monotonic()
    with pytest.raises(Exception) as caught:  # which type: checked by the caller, per family
        if not family.librdkafka:
            from priority_kafka import PriorityConsumer

            consumer = PriorityConsumer(topic, max_priority=3, group_id="g", **config)
            try:
                while time.monotonic() - start < 60:
                    consumer.poll(timeout_ms=500)
            finally:
                consumer.close()
        else:
            from priority_kafka.confluent import PriorityConsumer as CConsumer

            cconsumer = CConsumer({**config, "max.priority": 3, "group.id": "g"})
            try:
                cconsumer.subscribe([topic])
                while time.monotonic() - start < 60:
                    cconsumer.consume(10, 0.5)
            finally:
                cconsumer.close()
    return caught.value, time.monotonic() - start


# mode, what is wrong, and what the error says (per client library: kafka-python's calls,
# librdkafka's: Family.librdkafka indexes it).
FAILURES = {
    "wrong CA": ("SSL", {"ca": True},
                 ("broker's certificate is not signed by a CA in ssl_cafile",
                  "broker's certificate is not signed by a CA in ssl.ca.location")),
    "untrusted client certificate": ("MTLS", {"client": True},
                                     ("broker does not trust the client certificate",) * 2),
    "wrong key password": ("MTLS", {"key_password": "not-the-key-password"},
                           ("ssl_keyfile could not be read with ssl_password",
                            "ssl.key.location failed")),
    "wrong SCRAM password": ("SASL_SSL/SCRAM-SHA-512", {"password": "not-the-password"},
                             ("invalid credentials with SASL mechanism SCRAM-SHA-512",) * 2),
    "wrong PLAIN password": ("SASL_SSL/PLAIN", {"password": "not-the-password"},
                             ("Invalid username or password",) * 2),
}


@pytest.mark.parametrize("failure", list(FAILURES))
@over_families("tls_files")
def test_a_misconfigured_client_fails_fast_naming_the_cause(tls_broker, foreign, family,
                                                            failure):
    """A wrong CA, a client certificate the broker does not trust, a wrong key password and a
    wrong SASL password each fail within seconds with an error naming the cause, showing
    neither the key password nor any SASL password."""
    mode, wrong, messages = FAILURES[failure]
    config = settings(family, tls_broker, mode, ca=foreign if wrong.get("ca") else None,
                      client=foreign if wrong.get("client") else None,
                      key_password=wrong.get("key_password"),
                      password=wrong.get("password", PASSWORD))
    error, after = first_failure(family, config, "tls-fail")
    text = f"{error!s} {error!r}"
    assert messages[family.librdkafka] in text, text
    assert after < FAIL_FAST_S, (after, text)
    for secret in (PASSWORD, "not-the-password", "not-the-key-password",
                   tls_broker.tls.client_key_password, foreign.client_key_password):
        assert secret not in text


# Within a second unloaded (the first answer, or librdkafka's first close and a TLS probe);
# the margin is for a loaded machine.
TLS_LISTENER_S = 3.0


@over_families("tls_files")
def test_a_plaintext_client_on_a_tls_listener_is_told_so(tls_broker, family):
    """A consumer and a producer without security settings on the SSL listener say within
    seconds that the listener speaks TLS and which setting to change (kafka-python retried
    "Invalid frame length: 352518912" for 30 s; a confluent consumer raised nothing)."""
    from tests.test_unreachable import produce_until_error

    address = tls_broker.listener("SSL")
    setting = f"{family.key('security.protocol')}=SSL"
    error, after = first_failure(family, family.spell({"bootstrap.servers": address}),
                                 "tls-listener")
    reports: list[Any] = []
    produced, produced_after, _ = produce_until_error(family, address, reports)
    for failure, seconds in ((error, after), (produced, produced_after)):
        text = str(failure)
        assert f"The listener at {address} speaks TLS" in text and setting in text, text
        assert seconds < TLS_LISTENER_S, (seconds, text)


def test_no_secret_in_reprs_or_the_broker_log(tls_broker):
    """The TLS files' repr and the broker's repr and log show no key, key password or SASL
    password."""
    tls = tls_broker.tls
    shown = repr(tls) + repr(tls_broker)
    log = tls_broker.log_file.read_text()
    assert "Kafka Server started" in log and "ca.pem" in shown
    for secret in (PASSWORD, tls.client_key_password, "PRIVATE KEY"):
        assert secret not in shown and secret not in log


def dead_letter_count(servers: str, topic: str) -> int:
    """Records in ``topic``'s partition 0 (its end offset)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=servers)
    try:
        return int(consumer.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)])
    finally:
        consumer.close()


@over_families("tls_files")
def test_cli_consume_and_its_dead_letter_producer_connect_over_mutual_tls(
    tls_broker, family, unique_name, capsys
):
    """`consume -c` with the client's own TLS settings runs the executor over mutual TLS, and
    its dead-letter producer reaches the broker with the same settings."""
    from tests.test_cli import TESTS, json_of, run_cli

    topic, group, dead = unique_name("t"), unique_name("g"), unique_name("dlq")
    plain = tls_broker.bootstrap_servers
    run_cli(capsys, "topics", "create", topic, "-n", "3", "-b", plain)
    run_cli(capsys, "topics", "create", dead, "-n", "1", "-b", plain)
    json_of(capsys, "produce", topic, "-n", "3", "--count", "60", "-b", plain)
    config = settings(family, tls_broker, "MTLS")
    servers = config.pop(family.key("bootstrap.servers"))
    flags = [arg for key, value in config.items() for arg in ("-c", f"{key}={value}")]
    sys.path.insert(0, str(TESTS))
    try:
        summary = json_of(
            capsys, "consume", "cli_handler:fail_odd", "-t", topic, "-g", group, "-n", "3",
            "--client", family.name, "-b", servers, "--failure-policy", "dead_letter",
            "--dead-letter-topic", f"{dead}-0", "--max-attempts", "1", "--max-records", "60",
            "--duration", "15", *flags,
        )
    finally:
        sys.path.remove(str(TESTS))
    stats = summary["executor"]
    # All 60 records, each handled or dead-lettered. The run lasts until --duration:
    # --max-records counts successful handler calls only (noticed, left for its owner).
    assert stats["handled"] + stats["dead_lettered"] >= 60 and stats["dead_lettered"] > 0, stats
    assert dead_letter_count(plain, f"{dead}-0") == stats["dead_lettered"]
    assert tls_broker.tls.client_key_password not in capsys.readouterr().err


def spark_read_mtls(spark: Any, broker: LocalKafkaBroker, topic: str, client: str,
                    ca: TlsFiles) -> Any:
    tls = broker.tls
    options = {
        "kafka.bootstrap.servers": broker.listener("MTLS"), "kafka.security.protocol": "SSL",
        "kafka.ssl.cafile": str(ca.ca_file), "kafka.ssl.certfile": str(tls.client_cert_file),
        "kafka.ssl.keyfile": str(tls.client_key_file),
        "kafka.ssl.password": tls.client_key_password,
        "subscribe": topic, "maxPriority": "3", "client": client,
    }
    return spark.read.format("priority_kafka").options(**options).load()


@pytest.mark.spark
@over_families("tls_files", "spark_reader", argname="client")
def test_the_spark_source_reads_over_mutual_tls_and_fails_fast_on_a_wrong_ca(
    tls_broker, foreign, spark, client, unique_name
):
    """The Spark source reads a priority topic over mutual TLS with either client (the
    ``kafka.ssl.*`` options, mapped to librdkafka's names for confluent); with a CA that did
    not sign the broker's certificate the read fails within seconds, showing no key password."""
    topic = unique_name("spark-tls")
    create_priority_topics(tls_broker.bootstrap_servers, topic, 3)
    from priority_kafka import PriorityProducer

    with PriorityProducer(max_priority=3, bootstrap_servers=tls_broker.bootstrap_servers) as p:
        for i in range(30):
            p.send(topic, value=b"%d" % i, priority=i % 3)
    rows = spark_read_mtls(spark, tls_broker, topic, client, tls_broker.tls).collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(b"%d" % i for i in range(30))
    started = time.monotonic()
    with pytest.raises(Exception) as info:  # which type: Spark wraps the driver's error
        spark_read_mtls(spark, tls_broker, topic, client, foreign).collect()
    assert time.monotonic() - started < 15, str(info.value)[:2000]
    assert "the broker's certificate is not signed by a CA in ssl" in str(info.value)
    assert tls_broker.tls.client_key_password not in str(info.value)
