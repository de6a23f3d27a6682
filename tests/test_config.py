"""PriorityConfig, the mapping of Java-style keys and settings given as text (no broker)."""

from __future__ import annotations

import math

import pytest
from kafka import KafkaConsumer, KafkaProducer

from priority_kafka import ConfigError, LinearDistributor, PriorityConfig
from priority_kafka._properties import (
    kafka_python_kinds,
    load_properties,
    nearest,
    parse_properties,
    typed,
)
from priority_kafka.config import normalize_keys, split_configs
from priority_kafka.kafka_python.consumer._settings import ConsumerSettings


def test_dotted_keys_become_python_names_without_touching_the_input():
    """normalize_keys maps max.poll.records to max_poll_records and copies the mapping."""
    given = {"max.poll.records": 50, "group.id": "g", "client_id": "c"}
    assert normalize_keys(given) == {"max_poll_records": 50, "group_id": "g", "client_id": "c"}
    assert given == {"max.poll.records": 50, "group.id": "g", "client_id": "c"}


def test_a_key_given_in_both_spellings_is_rejected():
    """Two spellings of one key are ambiguous."""
    with pytest.raises(ConfigError, match="'max_poll_records' is given twice"):
        normalize_keys({"max_poll_records": 50, "max.poll.records": 60})


def test_split_separates_priority_settings_from_kafka_python_ones():
    """Priority settings go to PriorityConfig; everything else stays for KafkaConsumer."""
    config, rest = split_configs(
        {"max.priority": 3, "max.poll.records": 50, "group.id": "g", "fetch_max_wait_ms": 100}
    )
    assert config == PriorityConfig(max_priority=3, max_poll_records=50)
    assert rest == {"group_id": "g", "fetch_max_wait_ms": 100}
    assert config.reserved_quotas() == {2: 29, 1: 14, 0: 7}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "'max_priority' is required"),
        ({"max_priority": 0}, "'max_priority' must be at least 1 \\(got 0\\)"),
        ({"max_priority": 1001}, "'max_priority' must be at most 1000 \\(got 1001\\)"),
        (
            {"max_priority": 3, "max_poll_records": 2**63},
            "'max_poll_records' must be at most 1000000 \\(got 9223372036854775808\\)",
        ),
        (
            {"max_priority": 3, "max_poll_history_window_size": 10**9},
            "'max_poll_history_window_size' must be at most 100000 \\(got 1000000000\\)",
        ),
        ({"max_priority": 3, "max_poll_records": 6}, r"at least 7 for 3 priority levels \(got 6\)"),
        (
            {"max_priority": 3, "max_poll_history_window_size": 2},
            "'min_poll_window_maxout_threshold' must be at most max_poll_history_window_size",
        ),
        ({"max_priority": 3, "max_poll_records_distributor": 5}, "must be a callable"),
        (
            {"max_priority": 2, "max_poll_records_distributor": lambda n, m: {0: m}},
            "levels",
        ),
    ],
)
def test_bad_settings_name_the_setting(settings, message):
    """Each invalid setting fails with a ConfigError (a ValueError) that names it."""
    with pytest.raises(ValueError, match=message):
        split_configs(settings)


def test_any_distributor_plugs_in():
    """A built-in or user distributor decides the reserved split."""
    config = PriorityConfig(max_priority=3, max_poll_records=60,
                            max_poll_records_distributor=LinearDistributor())
    assert config.reserved_quotas() == {2: 30, 1: 20, 0: 10}
    custom = PriorityConfig(max_priority=2, max_poll_records=10,
                            max_poll_records_distributor=lambda n, m: {0: 1, 1: m - 1})
    assert custom.reserved_quotas() == {1: 9, 0: 1}


# -- settings given as text (.properties files, -c KEY=VALUE) ------------------------------------

PROPERTIES = r"""
# a comment
  ! another comment
bootstrap.servers = a:9092,b:9092
max.priority: 3
group.id   billing\
    -eu
client.id=with\=equals and\ space
sasl.jaas.config=one \
   two
unicode=caf\u00e9
empty=
"""


def test_properties_text_follows_java_syntax():
    """`key=value`, `key: value`, `key value`, #/! comments, continuations and escapes, as
    java.util.Properties.load reads them."""
    assert parse_properties(PROPERTIES) == {
        "bootstrap.servers": "a:9092,b:9092", "max.priority": "3", "group.id": "billing-eu",
        "client.id": "with=equals and space", "sasl.jaas.config": "one two",
        "unicode": "café", "empty": "",
    }


def test_a_properties_file_or_a_mapping_loads(tmp_path):
    path = tmp_path / "consumer.properties"
    path.write_text("max.priority=3\nmax.poll.records: 50\n", encoding="utf-8")
    assert load_properties(path) == load_properties(str(path)) == {
        "max.priority": "3", "max.poll.records": "50"}
    given = {"max.priority": 3}
    assert load_properties(given) == given and load_properties(given) is not given
    with pytest.raises(ConfigError, match=r"cannot read the properties file '.*nowhere'"):
        load_properties(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="must be a mapping of settings or the path"):
        load_properties(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(("client", "key", "text", "value"), [
    (KafkaConsumer, "max.poll.records", "50", 50),
    (KafkaConsumer, "session_timeout_ms", " 10000 ", 10000),
    (KafkaConsumer, "fetch.max.wait.ms", "100", 100),
    (KafkaConsumer, "enable.auto.commit", "FALSE", False),
    (KafkaConsumer, "consumer.timeout.ms", "inf", math.inf),
    (KafkaConsumer, "consumer.timeout.ms", "1500", 1500),
    (KafkaConsumer, "receive.buffer.bytes", "65536", 65536),  # default None, documented int
    (KafkaConsumer, "api.version", "3.6", (3, 6)),
    (KafkaConsumer, "group.id", "123", "123"),  # a string setting stays a string
    (KafkaConsumer, "bootstrap.servers", "a:1,b:2", "a:1,b:2"),
    (KafkaProducer, "acks", "all", "all"),
    (KafkaProducer, "acks", "1", 1),
    (KafkaProducer, "linger.ms", "5", 5),
    (KafkaProducer, "retries", "3", 3),
])
def test_text_becomes_the_type_the_client_documents(client, key, text, value):
    kinds = kafka_python_kinds(client)
    assert typed(key, text, kinds[key.replace(".", "_")]) == value
    assert typed(key, value, kinds[key.replace(".", "_")]) == value  # a value stays as it is


@pytest.mark.parametrize("client", [KafkaConsumer, KafkaProducer])
def test_kinds_come_from_the_clients_defaults(client):
    """No list kept here: every bool, int and float default of the client has its kind."""
    kinds = kafka_python_kinds(client)
    for name, default in client.DEFAULT_CONFIG.items():
        if isinstance(default, bool):
            assert kinds[name] == "bool", name
        elif isinstance(default, int) and name != "acks":  # or a number where documented so
            assert kinds[name] in ("int", "number"), name
        elif isinstance(default, float):
            assert kinds[name] == "number", name
        elif callable(default) or isinstance(default, list | tuple):
            assert kinds[name] is None, name


@pytest.mark.parametrize(("key", "text", "message"), [
    ("max.poll.records", "5x", r"'max.poll.records' must be an integer \(got '5x'\)"),
    ("enable.auto.commit", "yes", r"'enable.auto.commit' must be true or false \(got 'yes'\)"),
    ("consumer.timeout.ms", "soon", r"'consumer.timeout.ms' must be a number \(got 'soon'\)"),
    ("api.version", "3.x", r"'api.version' must be a version such as 3.6 \(got '3.x'\)"),
    ("key.deserializer", "json", r"'key.deserializer' cannot be given as text"),
])
def test_text_that_is_not_a_value_of_the_setting_names_it(key, text, message):
    with pytest.raises(ConfigError, match=message):
        typed(key, text, kafka_python_kinds(KafkaConsumer)[key.replace(".", "_")])


def test_priority_settings_given_as_text_are_values():
    """A .properties file's "max.priority": "3" is 3; the consumer's parse takes it."""
    settings = ConsumerSettings.parse({"max.priority": "3", "max.poll.records": "21",
                                       "max_poll_history_window_size": "8",
                                       "session.timeout.ms": "10000",
                                       "enable.auto.commit": "false", "group.id": "g"})
    assert settings.config == PriorityConfig(max_priority=3, max_poll_records=21,
                                             max_poll_history_window_size=8)
    assert settings.session_timeout_ms == 10000 and settings.auto_commit is False
    with pytest.raises(ConfigError, match=r"'max.priority' must be an integer \(got 'three'\)"):
        ConsumerSettings.parse({"max.priority": "three"})


@pytest.mark.parametrize(("key", "nearest_key"), [
    ("max.pol.records", "max.poll.records"),
    ("fetch_max_wait", "fetch_max_wait_ms"),
    ("max.prority", "max.priority"),
    ("sesion.timeout.ms", "session.timeout.ms"),
])
def test_a_misspelt_key_names_the_nearest_setting(key, nearest_key):
    """Refused before any client exists, as typed, with the nearest setting spelt alike;
    still kafka-python's KafkaConfigurationError (and a ConfigError)."""
    from kafka.errors import KafkaConfigurationError

    with pytest.raises(ConfigError) as caught:
        ConsumerSettings.parse({"max_priority": 3, key: "1"})
    assert isinstance(caught.value, KafkaConfigurationError)
    assert str(caught.value) == (f"{key!r} is not a PriorityConsumer setting; did you mean "
                                 f"{nearest_key!r}?")
    assert nearest("zzzz", ["max_poll_records"]) == ""


@pytest.mark.parametrize(("text", "quotas"), [
    ("linear", {2: 30, 1: 20, 0: 10}),
    (" Exponential ", {2: 35, 1: 17, 0: 8}),
    ("1,1,4", {2: 40, 1: 10, 0: 10}),
])
def test_the_distributor_given_as_text_is_named_or_weighted(text, quotas):
    """A .properties file names the distributor (as the Spark source's `distributor` option
    does) or gives weights per level, lowest first; on both families."""
    from priority_kafka.confluent._config import split_config

    given = {"max.priority": "3", "max.poll.records": "60", "max.poll.records.distributor": text}
    assert ConsumerSettings.parse(given).config.reserved_quotas() == quotas
    assert split_config(given)[0].reserved_quotas() == quotas


@pytest.mark.parametrize("text", ["fast", "1,-2,3", "", "1,nan,2"])
def test_a_distributor_text_that_names_none_is_refused_naming_the_key(text):
    with pytest.raises(ConfigError, match=r"'max\.poll\.records\.distributor' must be "
                                          r"'exponential', 'linear' or positive weights"):
        ConsumerSettings.parse({"max.priority": 3, "max.poll.records.distributor": text})
