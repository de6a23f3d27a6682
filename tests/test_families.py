"""The client-family registry: names, which family a consumer is of, and the one translation
of settings between the two spellings. That asking it loads no other family's library:
tests/test_exported_members.py (a confluent executor never imports kafka-python)."""

from __future__ import annotations

import pytest

from priority_kafka.errors import ConfigError
from priority_kafka.executor._clients import as_client
from priority_kafka.families import (
    _RENAMED,
    _SAME,
    AIOKAFKA,
    CAPABILITIES,
    CONFLUENT,
    DEFAULT,
    FAMILIES,
    KAFKA_PYTHON,
    NAMES,
    Family,
    family,
    family_of,
    having,
    to_kafka_python,
    to_librdkafka,
)

NO_BROKER = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}  # nothing listens on 1
# Each library's own settings: kafka-python, given its API version, asks no broker for it.
OWN = {KAFKA_PYTHON: {"api_version": (2, 5)}, CONFLUENT: {}, AIOKAFKA: {}}


def test_each_family_is_found_by_its_name_in_any_case_and_an_unknown_one_is_named() -> None:
    assert tuple(one.name for one in FAMILIES) == NAMES and DEFAULT in FAMILIES
    for one in FAMILIES:
        assert family(one.name) is one and family(one.name.upper()) is one
    with pytest.raises(ConfigError, match=r"unknown client family 'franz-go': one of "
                       r"'kafka-python', 'confluent', 'aiokafka'"):
        family("franz-go")


def test_a_consumer_is_of_its_own_family_and_a_fake_of_none(family: Family) -> None:
    """The library's own consumer, built from dotted settings in the family's spelling, is of
    that family and of no other; an object of neither is of none."""
    consumer = family.load().consumer({**family.spell(NO_BROKER), **OWN[family]})
    try:
        assert family_of(consumer) is family
        assert [one for one in FAMILIES if one.owns(consumer)] == [family]
    finally:
        as_client(consumer).close()  # the family's own close (aiokafka's is a coroutine)
    assert family_of(object()) is None


def test_settings_translate_both_ways_through_the_one_table() -> None:
    """kafka-python names (snake or dotted) become librdkafka's and back, values changed where
    the meaning is spelled differently; a setting the other side has no name for is named."""
    kafka = {"ssl_cafile": "/ca.pem", "fetch.max.wait.ms": 100, "security_protocol": "SSL",
             "ssl_check_hostname": False, "sasl_plain_username": "u"}
    librdkafka = to_librdkafka(kafka)
    assert librdkafka == {
        "ssl.ca.location": "/ca.pem", "fetch.wait.max.ms": 100, "security.protocol": "SSL",
        "ssl.endpoint.identification.algorithm": "none", "sasl.username": "u",
    }
    assert to_kafka_python(librdkafka) == {
        "ssl_cafile": "/ca.pem", "fetch_max_wait_ms": 100, "security_protocol": "SSL",
        "ssl_check_hostname": False, "sasl_plain_username": "u",
    }
    assert CONFLUENT.settings_of(kafka, KAFKA_PYTHON.key_style) == librdkafka
    assert KAFKA_PYTHON.settings_of(librdkafka, CONFLUENT.key_style)["ssl_cafile"] == "/ca.pem"
    with pytest.raises(KeyError, match=r"api\.version"):
        to_librdkafka({"api_version": (2, 5)})
    with pytest.raises(KeyError, match=r"queued\.min\.messages"):
        to_kafka_python({"queued.min.messages": 10})


def test_every_mapped_name_is_a_librdkafka_property():
    """librdkafka knows every property the translation produces (values aside); moved
    here from tests/spark/test_spark_options.py with the table."""
    from confluent_kafka import Consumer, KafkaException

    for name in {*_SAME, *(
        rename if isinstance(rename, str) else rename[0]
        for rename in _RENAMED.values()
    )}:
        try:
            Consumer({"group.id": "g", name: "x"}).close()
        except KafkaException as exc:
            assert "No such configuration property" not in str(exc), name


def test_capabilities_filter_the_families_and_an_unknown_one_is_named() -> None:
    """``having`` keeps registry order and only the families with every capability asked;
    a name that is not a capability is refused, not read as False."""
    assert having() == FAMILIES
    assert having("librdkafka") == (CONFLUENT,)
    assert having("tls_files", "spark_reader") == (KAFKA_PYTHON, CONFLUENT)
    assert AIOKAFKA.can("librdkafka") is False and CONFLUENT.can("consumer_protocol")
    assert having("caller_loop") == (AIOKAFKA,)
    assert {"librdkafka", "synchronous", "exactly_once", "spark_reader"} <= CAPABILITIES
    with pytest.raises(ValueError, match="not a capability of a client family: tls"):
        KAFKA_PYTHON.can("tls")


def test_each_family_package_holds_its_adapter(family: Family) -> None:
    """``Family.package`` is the folder a test patches the family's adapter in."""
    import importlib.util

    assert family.module.startswith(f"{family.package}.")
    assert importlib.util.find_spec(f"{family.package}._client") is not None


def test_the_spark_source_finds_each_familys_driver_and_reader_in_its_folder(
    family: Family,
) -> None:
    """A family the Spark source reads with has its Spark adapter in its own folder
    (``_spark.py``: ``Driver``, a KafkaDriver, and ``Reader``, a PartitionReader), which
    ``Family.spark()`` loads; one without refuses, naming the family, and has no such module."""
    import importlib.util

    adapter = importlib.util.find_spec(f"{family.package}._spark")
    if not family.spark_reader:
        assert adapter is None
        with pytest.raises(ConfigError, match=f"the {family.name} client family has no Spark"):
            family.spark()
        return
    from priority_kafka.spark.columns import PartitionReader
    from priority_kafka.spark.driver import KafkaDriver

    module = family.spark()
    assert module.__name__ == f"{family.package}._spark"
    assert issubclass(module.Driver, KafkaDriver)
    missing = [
        name for name in ("offset", "fetch", "watermarks", "seek", "close", "to_arrow")
        if not hasattr(module.Reader, name)
    ]
    assert missing == [], PartitionReader
