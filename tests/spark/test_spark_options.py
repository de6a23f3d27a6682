"""Tests for priority_kafka.spark.options: Spark's string options validated and typed."""

from __future__ import annotations

import importlib.util
import re

import pytest

from priority_kafka.distributors import (
    ExponentialDistributor,
    LinearDistributor,
    WeightedDistributor,
)
from priority_kafka.errors import ConfigError
from priority_kafka.families import CONFLUENT, KAFKA_PYTHON
from priority_kafka.spark.options import TopicSelection, parse_options
from tests.conftest import over_families

pytestmark = pytest.mark.spark

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}


def parse(streaming=True, **options):
    """Parse BASE plus ``options`` (a None value removes the option)."""
    merged = {k.lower(): v for k, v in {**BASE, **options}.items() if v is not None}
    return parse_options(merged, streaming=streaming)


def test_defaults_follow_spark_kafka_source():
    """Streams start at latest and batches at earliest; failOnDataLoss is on, headers off."""
    stream, batch = parse(True), parse(False)
    assert (stream.starting_offsets, batch.starting_offsets) == ("latest", "earliest")
    assert batch.ending_offsets == "latest"
    assert stream.fail_on_data_loss and not stream.include_headers
    assert stream.max_priority == 3 and stream.max_offsets_per_trigger is None
    assert stream.distributor == ExponentialDistributor()
    assert stream.topics == TopicSelection(subscribe=("orders",))


def test_option_names_are_case_insensitive():
    """Options given in any case are recognised, as Spark lower-cases them."""
    options = parse_options(
        {**BASE, "MAXOFFSETSPERTRIGGER": "50", "FailOnDataLoss": "false"}, streaming=True
    )
    assert options.max_offsets_per_trigger == 50 and not options.fail_on_data_loss


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kafka.bootstrap.servers": None}, "'kafka.bootstrap.servers' is required"),
        ({"subscribe": None}, "Exactly one of the options 'subscribe', 'subscribePattern'"),
        ({"subscribePattern": "o.*"}, "Exactly one of the options"),
        ({"subscribe": "bad topic"}, "Option 'subscribe'"),
        ({"subscribe": None, "subscribePattern": "(unclosed"}, "not a valid regex"),
        ({"maxOffsetsPerTrigger": "-5"}, "'maxOffsetsPerTrigger' must be at least 1 (got -5)"),
        ({"maxOffsetsPerTrigger": "lots"}, "'maxOffsetsPerTrigger' must be an integer"),
        ({"maxOffsetsPerTrigger": "5"}, "'maxOffsetsPerTrigger' must be at least 7 to give"),
        ({"minPartitions": "0"}, "'minPartitions' must be at least 1 (got 0)"),
        ({"maxPriority": "0"}, "'maxPriority' must be at least 1"),
        ({"failOnDataLoss": "maybe"}, "'failOnDataLoss' must be 'true' or 'false'"),
        ({"startingOffsets": "{\"orders-2\": {\"0\": 1}"}, "'startingOffsets' is not valid JSON"),
        ({"startingOffsets": "{\"orders\": {\"0\": 1}}"}, "priority topic '<topic>-<level>'"),
        ({"startingOffsets": "{\"orders-3\": {\"0\": 1}}"}, "'maxPriority' is 3"),
        ({"startingOffsets": "{\"orders-1\": {\"x\": 1}}"}, "bad partition 'x'"),
        ({"startingOffsets": "{\"orders-1\": {\"0\": -3}}"}, "bad offset -3"),
        ({"startingOffsets": "{\"orders-1\": [1]}"}, "must map 'orders-1' to a JSON object"),
        ({"startingOffsets": "newest"}, "'startingOffsets' must be 'earliest' or 'latest'"),
        ({"endingOffsets": "latest"}, "'endingOffsets' is for batch reads only"),
        ({"distributor": "quadratic"}, "'distributor' must be 'exponential', 'linear'"),
        ({"distributor": "1,2"}, "one weight per level: 'maxPriority' is 3"),
        ({"maxoutThreshold": "7"}, "'maxoutThreshold' must be at most 'historyWindowSize' 6"),
        ({"maxOffsetPerTrigger": "50"}, "Unknown option(s) ['maxoffsetpertrigger']"),
        ({"kafka.auto.offset.reset": "earliest"}, "set 'startingOffsets' instead"),
        ({"kafka.no.such.setting": "1"}, "'no_such_setting' is unknown)"),
        ({"kafka.fetch.max.wait": "1"}, "unknown; did you mean 'kafka.fetch.max.wait.ms'?"),
        ({"maxPriorty": "3"}, "did you mean 'maxpriority'? (option names are case-"),
        ({"kafka.fetch.max.bytes": "big"}, "'kafka.fetch.max.bytes' must be a number"),
        ({"kafka.selector": "x"}, "cannot be given as a string"),
        ({"subscribe": None, "assign": "{\"orders-1\": []}"}, "non-empty JSON array"),
        ({"subscribe": None, "assign": "[1]"}, "'assign' must be a JSON object"),
        ({"subscribe": None, "subscribePattern": "a{99999999999}"}, "not a valid regex"),
        ({"maxPriority": "30000"}, "'maxPriority' must be at most 1000 (got 30000)"),
        ({"historyWindowSize": "1000000000"}, "'historyWindowSize' must be at most 100000"),
        ({"maxOffsetsPerTrigger": str(2**63)}, "'maxOffsetsPerTrigger' must be at most"),
        ({"maxOffsetsPerTrigger": "9" * 5000}, "'maxOffsetsPerTrigger' must be an integer"),
        ({"kafka.fetch.max.bytes": str(2**63)}, "'kafka.fetch.max.bytes' must be a number"),
        ({"kafka.fetch.max.bytes": "-1"}, "'kafka.fetch.max.bytes' must be a number"),
        ({"kafka.consumer.timeout.ms": "nan"}, "'kafka.consumer.timeout.ms' must be a number"),
        ({"kafka.group.id": " "}, "'kafka.group.id' must be a non-empty group id"),
        ({"startingOffsets": f'{{"orders-1": {{"0": {2**63}}}}}'}, "bad offset"),
        ({"startingOffsets": f'{{"orders-1": {{"0": {"9" * 5000}}}}}'}, "cannot be read"),
        ({"startingOffsets": "{\"a\": " * 100_000}, "'startingOffsets' cannot be read"),
    ],
)
def test_bad_options_fail_with_a_message_naming_them(options, message):
    """Each malformed or missing option raises ConfigError naming the option and value."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse(**options)


def test_batch_rejects_latest_as_start_and_earliest_as_end():
    """A batch cannot start at latest nor end at earliest (Spark's rule too)."""
    with pytest.raises(ConfigError, match="'startingOffsets' must be 'earliest', or a JSON"):
        parse(False, startingOffsets="latest")
    with pytest.raises(ConfigError, match="bad offset -1"):
        parse(False, startingOffsets='{"orders-1": {"0": -1}}')
    with pytest.raises(ConfigError, match="'endingOffsets' must be 'latest', or a JSON"):
        parse(False, endingOffsets="earliest")


def test_schema_time_validation_accepts_options_of_either_kind_of_read():
    """Before Spark says batch or stream, mode-specific options are both accepted."""
    assert parse(None, endingOffsets="latest", startingOffsets="latest").ending_offsets == "latest"


def test_offsets_json_is_keyed_by_priority_topic_partition():
    """The JSON form maps priority-topic partitions to offsets, -2/-1 meaning earliest/latest."""
    options = parse(startingOffsets='{"orders-2": {"0": 42, "1": -2}, "orders-0": {"3": -1}}')
    assert options.starting_offsets == {("orders-2", 0): 42, ("orders-2", 1): -2,
                                        ("orders-0", 3): -1}


def test_assign_and_pattern_select_topics():
    """assign lists priority-topic partitions; subscribePattern keeps the regex."""
    assigned = parse(subscribe=None, assign='{"orders-1": [1, 0], "pay-0": [2]}')
    assert assigned.topics.assign == (("orders-1", 0), ("orders-1", 1), ("pay-0", 2))
    assert parse(subscribe=None, subscribePattern="ord.*").topics.pattern == "ord.*"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("exponential", ExponentialDistributor()),
        ("LINEAR", LinearDistributor()),
        ("1,2,5", WeightedDistributor([1, 2, 5])),
        ("0.5, 1, 2.5", WeightedDistributor([0.5, 1, 2.5])),
    ],
)
def test_distributor_choices(text, expected):
    """The distributor option names a built-in or gives weights, lowest level first."""
    assert parse(distributor=text).distributor == expected


def test_kafka_options_become_typed_kafka_python_settings():
    """kafka.* options map to kafka-python names with the types of its defaults."""
    options = parse(**{
        "kafka.fetch.max.bytes": "1024", "kafka.check.crcs": "false",
        "kafka.security.protocol": "PLAINTEXT", "kafka.group.id": "pipeline",
    })
    assert options.kafka_params == {
        "fetch_max_bytes": 1024, "check_crcs": False, "security_protocol": "PLAINTEXT"
    }
    assert options.group_id == "pipeline"


def test_new_burst_splits_the_trigger_limit_by_the_distributor():
    """The burst for a limit reserves the distributor's split, with the configured window."""
    options = parse(distributor="1,1,2", historyWindowSize="3", maxoutThreshold="2")
    burst = options.new_burst(40)
    assert burst.reserved == {2: 20, 1: 10, 0: 10}
    assert (burst.window_size, burst.maxout_threshold) == (3, 2)


def test_client_auto_reads_with_confluent_when_it_is_installed(monkeypatch):
    """client=auto picks confluent-kafka when importable, kafka-python otherwise."""
    assert parse().client == CONFLUENT.name
    assert parse(client="KAFKA-PYTHON").client == KAFKA_PYTHON.name
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec",
        lambda name, *a: None if name == "confluent_kafka" else real_find_spec(name, *a),
    )
    assert parse(client="auto").client == KAFKA_PYTHON.name
    with pytest.raises(ConfigError, match="'client' is 'confluent' but confluent-kafka is not"):
        parse(client="confluent")


def test_client_must_be_a_known_one():
    """An unknown client is rejected, naming the option and the choices."""
    with pytest.raises(ConfigError, match=r"'client' must be one of 'auto', 'kafka-python', "):
        parse(client="librdkafka")


def test_kafka_options_map_to_librdkafka_names_for_the_confluent_client():
    """kafka.* options reach librdkafka under its names, with values converted where needed."""
    options = parse(client="confluent", **{
        "kafka.fetch.max.wait.ms": "100", "kafka.isolation.level": "read_committed",
        "kafka.ssl.check.hostname": "false", "kafka.sasl.plain.username": "alice",
        "kafka.security.protocol": "SASL_PLAINTEXT",
    })
    assert options.confluent_params == {
        "fetch.wait.max.ms": 100, "isolation.level": "read_committed",
        "ssl.endpoint.identification.algorithm": "none", "sasl.username": "alice",
        "security.protocol": "SASL_PLAINTEXT",
    }
    assert options.kafka_params["fetch_max_wait_ms"] == 100  # the driver's kafka-python view
    assert parse(client="kafka-python", **{"kafka.fetch.max.wait.ms": "100"}).confluent_params == {}


@over_families("spark_reader", argname="client")
def test_request_timeout_bounds_driver_and_reader_calls_on_either_client(client):
    """One option bounds metadata and offsets requests whichever client makes them."""
    assert parse(client=client).request_timeout_s == 30.0
    assert parse(client=client, **{"kafka.request.timeout.ms": "2500"}).request_timeout_s == 2.5


def test_kafka_options_librdkafka_lacks_are_rejected_for_the_confluent_client():
    """A kafka-python-only setting fails with the confluent client, naming the option."""
    with pytest.raises(ConfigError, match=r"'kafka.max.poll.records' has no librdkafka equivalent"):
        parse(client="confluent", **{"kafka.max.poll.records": "10"})
    assert parse(client="kafka-python", **{"kafka.max.poll.records": "10"}).kafka_params == {
        "max_poll_records": 10
    }
