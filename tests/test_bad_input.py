"""Fuzz every pure public entry point with values of wrong types and ranges.

Each call either accepts the value or raises a documented error (ConfigError, a ValueError; or
TypeError where the docs say so) whose message names the argument; never OverflowError,
MemoryError, a bare float()/int() error, or a hang (each case and each test has a time bound).

The normal suite runs 60 cases per test (16 tests; 150 for the Spark options); the full run,
700 per test, 11,200 cases:

    PRIORITY_KAFKA_FUZZ_EXAMPLES=700 .venv/bin/python -m pytest tests/test_bad_input.py
"""

from __future__ import annotations

import math
import os
from datetime import timedelta
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.admin import KafkaAdminClient

from priority_kafka import (
    CapacityBurst,
    ConfigError,
    ExecutorConfig,
    ExponentialDistributor,
    LinearDistributor,
    PriorityConfig,
    PriorityConsumer,
    PriorityProducer,
    ShardedExecutor,
    WeightedDistributor,
    create_priority_topics,
)
from priority_kafka._checks import check_int, check_number
from priority_kafka.config import split_configs
from priority_kafka.distributors import distribute
from priority_kafka.naming import (
    level_group_id,
    level_pattern,
    priority_topic,
    priority_topics,
    split_priority_topic,
)
from priority_kafka.spark.options import parse_options
from tests.fakes import FakeLevelConsumer, fake_cluster_topics

# Few examples per test by default: the file must stay fast; the explicit edge values come
# first. Every case must answer within CASE_BOUND (hypothesis's deadline: a case over it fails).
EXAMPLES = int(os.environ.get("PRIORITY_KAFKA_FUZZ_EXAMPLES", "60"))
CASE_BOUND = timedelta(seconds=5)
FUZZ = settings(
    max_examples=EXAMPLES, deadline=CASE_BOUND, suppress_health_check=[HealthCheck.too_slow]
)
TIME_BOUND = pytest.mark.timeout(20 + EXAMPLES // 2)

EDGES = [
    None, True, False, math.nan, math.inf, -math.inf, 2**63, -(2**63), 10**4000, -1, 0,
    1e308, "", [], [1, 2], {}, b"3", "3",
]
#: Also too long to print (for Python, or usefully): built, so hypothesis never prints them.
HUGE = st.one_of(
    st.builds(pow, st.just(10), st.just(5000)),
    st.builds(str.__mul__, st.just("x"), st.just(100_000)),
)
#: Values of every kind: the edges, then random ones.
bad = st.one_of(
    st.sampled_from(EDGES),
    HUGE,
    st.integers(),
    st.floats(),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.integers(), st.integers(), max_size=3),
)
#: Strings as Spark passes options: numbers (huge ones too), words, JSON-ish and regex text.
bad_text = st.one_of(
    st.sampled_from([
        "", " ", "nan", "NaN", "inf", "-inf", "Infinity", "-1", "0", str(2**63), "9" * 5000,
        "1e9", "true", "{", "[]", '{"a": 1}', "a{99999999999}", "(" * 1000,
        '{"orders-1": {"0": Infinity}}', '{"orders-1": {"1e400": 5}}',
    ]),
    st.builds(str.__mul__, st.sampled_from(["x", "9", "("]), st.just(100_000)),
    st.integers().map(str),
    st.floats().map(str),
    st.text(max_size=30),
    st.text(alphabet="{}[]():,\"0123456789-.aeiorsx*+?|\\", max_size=40),
)


def fails_cleanly(call, *names, errors=(ConfigError,)):
    """Run ``call``; an error must be one of ``errors`` and its message name one of ``names``.

    Any other exception (OverflowError, MemoryError, a bare ValueError...) propagates and
    fails the test; accepting a value that happens to be valid is fine.
    """
    try:
        call()
    except errors as exc:
        message = str(exc)
        assert any(name in message for name in names), (names, message)


PRIORITY_FIELDS = [
    "max_priority", "max_poll_records", "max_poll_history_window_size",
    "min_poll_window_maxout_threshold", "max_poll_records_distributor",
]


@TIME_BOUND
@FUZZ
@given(st.sampled_from(PRIORITY_FIELDS), bad)
def test_priority_config(field, value):
    """PriorityConfig and its quotas take any value of any field cleanly."""
    settings_ = {"max_priority": 3, field: value}

    def build():
        PriorityConfig(**settings_).reserved_quotas()

    # A valid max_priority can still be too many levels for max_poll_records.
    fails_cleanly(build, field, "max_poll_records", "max_poll_history_window_size")


@TIME_BOUND
@FUZZ
@given(st.sampled_from(PRIORITY_FIELDS), bad)
def test_split_configs_with_dotted_keys(field, value):
    """Java-style dotted keys are checked like the Python names, which the message uses."""
    dotted = {"max.priority": 3, field.replace("_", "."): value}
    fails_cleanly(
        lambda: split_configs(dotted), field, "max_poll_records", "max_poll_history_window_size"
    )


EXECUTOR_FIELDS = [
    "shards", "ordering", "commit_interval_ms", "commit_timeout_ms", "max_in_flight_per_partition",
    "resume_in_flight_per_partition", "max_in_flight_bytes", "max_attempts", "retry_backoff_ms",
    "retry_backoff_max_ms", "failure_policy", "dead_letter_topic", "drain_timeout_ms",
    "revoke_timeout_ms", "poll_timeout_ms", "async_concurrency", "stuck_warning_ms",
]


@TIME_BOUND
@FUZZ
@given(st.sampled_from(EXECUTOR_FIELDS), bad)
def test_executor_config(field, value):
    """ExecutorConfig takes any value of any field cleanly."""
    fails_cleanly(lambda: ExecutorConfig(**{field: value}), field)


@TIME_BOUND
@FUZZ
@given(bad)
def test_executor_consumer_argument(value):
    """ShardedExecutor refuses anything that is not a consumer with a TypeError naming it."""
    fails_cleanly(lambda: ShardedExecutor(value, print), "'consumer'", errors=(TypeError,))


@TIME_BOUND
@FUZZ
@given(
    st.sampled_from([ExponentialDistributor(), LinearDistributor()]),
    st.one_of(bad, st.integers(1, 2000)),
    st.one_of(bad, st.integers(1, 10**13)),
)
def test_distributors(distributor, max_priority, max_poll_records):
    """The built-in distributors and distribute() take any level count and record count."""
    names = ("max_priority", "max_poll_records")
    fails_cleanly(lambda: distributor(max_priority, max_poll_records), *names)
    fails_cleanly(lambda: distributor.minimum_records(max_priority), *names)
    fails_cleanly(lambda: distribute(distributor, max_priority, max_poll_records), *names)


@TIME_BOUND
@FUZZ
@given(st.one_of(bad, st.lists(bad, max_size=4)))
def test_weighted_distributor(weights):
    """WeightedDistributor takes any weights cleanly."""
    fails_cleanly(lambda: WeightedDistributor(weights), "'weights'")


@TIME_BOUND
@FUZZ
@given(bad)
def test_distribute_rejects_bad_distributors(distributor):
    """distribute() refuses a distributor that is not callable, naming it."""
    fails_cleanly(lambda: distribute(distributor, 3, 100), "'distributor'")


@TIME_BOUND
@FUZZ
@given(bad, st.one_of(bad, st.integers(0, 10**6)))
def test_naming_helpers(text, number):
    """Topic and group names take any topic, level and level count cleanly."""
    fails_cleanly(lambda: priority_topic(text, 0), "'topic'")
    fails_cleanly(lambda: priority_topic("orders", number), "'level'")
    fails_cleanly(lambda: priority_topics("orders", number), "'max_priority'")
    fails_cleanly(lambda: priority_topics(text, 3), "'topic'")
    fails_cleanly(lambda: split_priority_topic(text), "'name'")
    fails_cleanly(lambda: level_group_id(text, 0), "'group_id'")
    fails_cleanly(lambda: level_group_id("g", number), "'level'")
    fails_cleanly(lambda: level_pattern("orders", number), "'level'")


@TIME_BOUND
@FUZZ
@given(st.one_of(bad, bad_text))
def test_level_pattern(pattern):
    """Any pattern, however malformed or huge its repeat counts, fails as a ConfigError."""
    fails_cleanly(lambda: level_pattern(pattern, 2), "'pattern'")
    if isinstance(pattern, str):
        fails_cleanly(lambda: split_priority_topic(f"{pattern}-1"), "'name'")


@TIME_BOUND
@FUZZ
@given(
    st.sampled_from(["reserved", "window_size", "maxout_threshold", "counts"]),
    st.one_of(bad, st.dictionaries(st.one_of(st.integers(), st.text()), bad, max_size=3),
              st.dictionaries(
        st.integers(0, 3), st.one_of(bad, st.integers(0, 2**70)), max_size=4
    )),
)
def test_capacity_burst(argument, value):
    """CapacityBurst and record() take any reserved quotas, window, threshold or counts."""
    if argument == "counts":
        burst = CapacityBurst({0: 1, 1: 2})
        fails_cleanly(lambda: burst.record(value), "'counts")
        burst.quotas()
    else:
        arguments = {"reserved": {0: 1, 1: 2}, argument: value}
        fails_cleanly(
            lambda: CapacityBurst(**arguments).quotas(), f"'{argument}", "'window_size'"
        )


@TIME_BOUND
@FUZZ
@given(bad)
def test_shared_checks(value):
    """check_int and check_number refuse anything out of type or range, naming it."""
    fails_cleanly(lambda: check_int("n", value, minimum=0, maximum=10), "'n'")
    fails_cleanly(lambda: check_number("t", value, minimum=0), "'t'")
    fails_cleanly(lambda: check_number("t", value, minimum=0, allow_inf=True), "'t'")


def fake_consumer(**configs):
    return PriorityConsumer(
        max_priority=3, max_poll_records=50, group_id="app",
        consumer_factory=FakeLevelConsumer, topic_lister=fake_cluster_topics, **configs,
    )


@TIME_BOUND
@FUZZ
@given(st.sampled_from(["consumer_timeout_ms", "auto_commit_interval_ms",
                        "session_timeout_ms"]), bad)
def test_priority_consumer_settings(name, value):
    """The consumer's own timing settings are checked at construction, naming the setting."""
    fails_cleanly(lambda: fake_consumer(**{name: value}).close(), name)


@TIME_BOUND
@FUZZ
@given(st.sampled_from(["timeout_ms", "max_records"]), bad)
def test_priority_consumer_poll(name, value):
    """poll() checks its timeout and record cap; NaN and huge values never reach the loop."""
    if name == "timeout_ms" and isinstance(value, int | float) and value >= 0:
        return  # a valid wait (up to for ever, as documented), not bad input
    consumer = fake_consumer()
    consumer.subscribe(["orders"])
    try:
        fails_cleanly(lambda: consumer.poll(**{name: value}), name)
    finally:
        consumer.close()


class FakeKafkaProducer:
    """Stands in for kafka-python's KafkaProducer: accepts every send."""

    def __init__(self, **configs):
        self.sent = []

    def send(self, topic, **kwargs):
        self.sent.append(topic)


@TIME_BOUND
@FUZZ
@given(st.sampled_from(["max_priority", "default_priority", "priority", "topic"]), bad)
def test_priority_producer(name, value):
    """PriorityProducer checks its level count, default level, and each send's level and topic."""
    with mock.patch("priority_kafka.kafka_python.producer.KafkaProducer", FakeKafkaProducer), \
            mock.patch("priority_kafka.kafka_python.producer.cluster_topics", lambda connection: (
                # Any topic given as a str has its levels: the fuzz is about bad values.
                fake_cluster_topics() | ({f"{value}-{n}" for n in range(3)}
                                         if isinstance(value, str) else set()))):
        if name in ("max_priority", "default_priority"):
            arguments = {"max_priority": 3, name: value}
            fails_cleanly(lambda: PriorityProducer(**arguments), f"'{name}'")
            return
        producer = PriorityProducer(max_priority=3)
        send = {"topic": "orders", name: value}
        fails_cleanly(lambda: producer.send(value=b"v", **send), f"'{name}'")


class FakeAdmin(KafkaAdminClient):
    """A KafkaAdminClient that knows no topics, creates nothing and never connects."""

    def __init__(self, **configs):
        pass

    def close(self):
        pass

    def list_topics(self):
        return []

    def create_topics(self, new_topics, **kwargs):
        return None


@TIME_BOUND
@FUZZ
@given(
    st.sampled_from(["topic", "max_priority", "num_partitions", "replication_factor",
                     "topic_configs", "bootstrap_servers", "min_insync_replicas"]),
    bad,
)
def test_create_priority_topics(name, value):
    """create_priority_topics checks every argument before it connects."""
    arguments = {"bootstrap_servers": FakeAdmin(), "topic": "orders", "max_priority": 3,
                 name: value}
    # Valid bootstrap servers would build a real admin client: it builds the fake instead.
    with mock.patch("priority_kafka.kafka_python.producer.KafkaAdminClient", FakeAdmin):
        fails_cleanly(lambda: create_priority_topics(**arguments), f"'{name}'")


SPARK_BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}
SPARK_OPTIONS = [
    "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
    "maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss", "includeHeaders",
    "maxPriority", "distributor", "historyWindowSize", "maxoutThreshold",
    "kafkaConsumer.pollTimeoutMs", "kafka.fetch.max.bytes", "kafka.consumer.timeout.ms",
    "kafka.check.crcs", "kafka.group.id", "kafka.client.id",
]


@TIME_BOUND
@settings(FUZZ, max_examples=max(150, EXAMPLES))  # many options: more cases by default
@given(st.sampled_from(SPARK_OPTIONS), bad_text, st.sampled_from([True, False, None]))
def test_spark_options(name, text, streaming):
    """Every Spark option takes any string cleanly, and the message names the option."""
    options = {**SPARK_BASE, name: text}
    if name in ("subscribePattern", "assign"):
        del options["subscribe"]  # exactly one topic option
    # maxPriority and endingOffsets also fail on the other options they constrain.
    fails_cleanly(
        lambda: parse_options(options, streaming=streaming),
        f"'{name}'", "'maxOffsetsPerTrigger'", "'subscribe'", "'maxoutThreshold'",
    )
