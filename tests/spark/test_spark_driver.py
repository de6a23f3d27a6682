"""Tests for priority_kafka.spark.driver: partitions, offsets and group commits on the broker,
through both clients' drivers."""

from __future__ import annotations

import re
import time

import pytest
from kafka import KafkaConsumer, TopicPartition

from priority_kafka.errors import ConfigError
from priority_kafka.families import family as registered
from priority_kafka.producer import create_priority_topics
from priority_kafka.spark.driver import KafkaDriver, open_driver
from priority_kafka.spark.errors import DataLossError, KafkaCallError
from priority_kafka.spark.options import parse_options
from tests.conftest import names_having

pytestmark = [pytest.mark.spark, pytest.mark.integration]


SPARK_READERS = names_having("spark_reader")


@pytest.fixture(params=SPARK_READERS)
def driver_for(bootstrap_servers, request):
    """Make the ``client`` option's driver from string options; closes them after the test."""
    drivers = []

    def make(**options):
        parsed = parse_options(
            {"kafka.bootstrap.servers": bootstrap_servers, "client": request.param,
             **{k.lower(): v for k, v in options.items()}},
            streaming=True,
        )
        drivers.append(open_driver(parsed))
        # The family's own Spark adapter, from its folder (the registry's Family.spark()).
        assert type(drivers[-1]) is registered(request.param).spark().Driver
        assert isinstance(drivers[-1], KafkaDriver)
        assert type(drivers[-1]).__module__ == f"{registered(request.param).package}._spark"
        return drivers[-1]

    yield make
    for driver in drivers:
        driver.close()


def test_subscribe_reads_every_existing_level_of_the_topic(
    driver_for, bootstrap_servers, unique_name, caplog
):
    """subscribe=name covers each partition of name-0..2; a missing level is left out, with a
    warning naming it."""
    name = unique_name("drv")
    create_priority_topics(bootstrap_servers, name, 2, num_partitions=2)  # levels 0 and 1 only
    assert driver_for(subscribe=name).partitions() == [
        (f"{name}-0", 0), (f"{name}-0", 1), (f"{name}-1", 0), (f"{name}-1", 1)
    ]
    assert f"topics {name}-2 do not exist" in caplog.text


def test_a_level_above_max_priority_fails_naming_it(driver_for, bootstrap_servers, unique_name):
    """A fourth level with maxPriority 3 (the default) was never read, silently; now the
    source's partitions() fails naming it."""
    name = unique_name("four")
    create_priority_topics(bootstrap_servers, name, 4)
    with pytest.raises(ConfigError, match=f"{name}-3 exists but maxPriority=3 reads only "
                       f"{name}-0..{name}-2"):
        driver_for(subscribe=name).partitions()


@pytest.mark.parametrize("client", SPARK_READERS)
def test_without_max_priority_the_source_takes_the_levels_the_broker_has(
    client, bootstrap_servers, unique_name
):
    """maxPriority not given: the source reads as many levels as the subscribed topics have
    (4 here, where the default 3 would fail naming the fourth); a given maxPriority is kept;
    a topic without levels yet keeps the default (Spark's Kafka source skips missing topics;
    the driver warns naming them)."""
    from priority_kafka.spark.source import _with_levels

    def levels_of(given):
        return _with_levels(given, parse_options(given, streaming=True), True)

    name = unique_name("disc")
    create_priority_topics(bootstrap_servers, name, 4)
    given = {"kafka.bootstrap.servers": bootstrap_servers, "client": client, "subscribe": name}
    options = levels_of(given)
    assert options.max_priority == 4
    driver = open_driver(options)
    try:
        assert {topic for topic, _ in driver.partitions()} == {f"{name}-{n}" for n in range(4)}
    finally:
        driver.close()
    assert levels_of({**given, "maxPriority": "4"}).max_priority == 4
    assert levels_of({**given, "subscribe": unique_name("none")}).max_priority == 3


def test_pattern_matches_whole_logical_names_below_max_priority(
    driver_for, bootstrap_servers, unique_name
):
    """subscribePattern matches logical topics in full (name-3 of namex is not name's) and
    only levels below maxPriority; a matched level at or above it fails, naming it."""
    name = unique_name("pat")
    create_priority_topics(bootstrap_servers, name, 3)
    create_priority_topics(bootstrap_servers, name + "x", 4)
    driver = driver_for(subscribePattern=name, maxPriority="3")
    assert driver.partitions() == [(f"{name}-0", 0), (f"{name}-1", 0), (f"{name}-2", 0)]
    with pytest.raises(ConfigError, match=f"{name}-2 matches pattern"):
        driver_for(subscribePattern=name, maxPriority="2").partitions()


def test_assign_reads_exactly_the_given_partitions(driver_for):
    """assign needs no metadata: the listed partitions are the ones read."""
    driver = driver_for(assign='{"t-2": [1], "t-0": [0]}')
    assert driver.partitions() == [("t-0", 0), ("t-2", 1)]


def test_resolve_turns_keywords_and_json_into_offsets(
    driver_for, priority_topic
):
    """earliest/latest and -2/-1 resolve per partition; unlisted partitions take the default."""
    name = priority_topic({2: 6, 1: 4})
    driver = driver_for(subscribe=name)
    partitions = driver.partitions()
    assert driver.resolve("startingOffsets", "latest", partitions) == {
        (f"{name}-2", 0): 6, (f"{name}-1", 0): 4, (f"{name}-0", 0): 0
    }
    spec = {(f"{name}-2", 0): 3, (f"{name}-1", 0): -1}
    assert driver.resolve("startingOffsets", spec, partitions) == {
        (f"{name}-2", 0): 3, (f"{name}-1", 0): 4, (f"{name}-0", 0): 0
    }


def test_resolve_rejects_offsets_for_partitions_not_read(driver_for, priority_topic):
    """JSON offsets for a partition that does not exist name it in a ConfigError."""
    name = priority_topic({2: 1})
    driver = driver_for(subscribe=name)
    with pytest.raises(ConfigError, match=rf"'endingOffsets' names partitions .*'{name}-2', 5"):
        driver.resolve("endingOffsets", {(f"{name}-2", 5): 1}, driver.partitions())


def test_a_position_past_the_log_end_is_data_loss(driver_for):
    """A start beyond the latest offset (a recreated topic) fails with failOnDataLoss."""
    driver = driver_for(assign='{"t-1": [0]}')
    with pytest.raises(DataLossError, match="t-1 partition 0: was at offset 9, the log now ends"):
        driver.check_start({("t-1", 0): 9}, {("t-1", 0): 2})
    with pytest.raises(DataLossError, match="the partition no longer exists"):
        driver.check_start({("t-1", 0): 9}, {})


def test_without_fail_on_data_loss_a_lost_position_only_warns(driver_for, caplog):
    """failOnDataLoss=false logs the problem instead of raising."""
    driver = driver_for(assign='{"t-1": [0]}', failOnDataLoss="false")
    driver.check_start({("t-1", 0): 9}, {("t-1", 0): 2})
    assert "was at offset 9" in caplog.text


def test_commit_goes_to_the_per_level_groups(
    driver_for, bootstrap_servers, priority_topic, unique_name
):
    """Offsets of level i are committed to group <group.id>-i, as a PriorityConsumer uses."""
    name = priority_topic({2: 5, 0: 3})
    group = unique_name("grp")
    driver_for(subscribe=name, **{"kafka.group.id": group}).commit(
        {(f"{name}-2", 0): 5, (f"{name}-0", 0): 2}
    )
    for level, expected in ((2, 5), (0, 2)):
        consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=f"{group}-{level}")
        try:
            assert consumer.committed(TopicPartition(f"{name}-{level}", 0)) == expected
        finally:
            consumer.close()


class _FlakyConsumer:
    """list_topics() fails ``failures`` times, each failure reporting one authentication error
    to the driver's error callback (served by poll, as librdkafka does), then answers."""

    def __init__(self, driver: KafkaDriver, failures: int) -> None:
        self.failures, self.calls, self.pending = failures, 0, []
        self.error_cb = driver._login.error_cb()

    def list_topics(self, timeout: float):
        from confluent_kafka import KafkaError, KafkaException

        self.calls += 1
        assert timeout <= 1.0  # waits in slices, to look at the error callback in between
        if self.calls <= self.failures:
            self.pending.append(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error"))
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return type("Metadata", (), {"topics": {}})()

    def poll(self, timeout: float) -> None:
        while self.pending:
            self.error_cb(self.pending.pop())

    def close(self) -> None: ...


@pytest.mark.parametrize(("failures", "raises"), [(1, False), (2, True)])
def test_confluent_driver_gives_up_on_a_refused_login_not_on_one_cut(failures, raises):
    """One authentication error (a connection cut during the handshake) is retried; a second in
    the same call raises it at once instead of waiting out the 30 s timeout."""
    from confluent_kafka import KafkaException

    driver = open_driver(parse_options(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "client": "confluent", "subscribe": "t"},
        streaming=True,
    ))
    driver._consumer.close()
    driver._consumer = flaky = _FlakyConsumer(driver, failures)
    if raises:
        with pytest.raises(KafkaCallError, match="SASL authentication error") as info:
            driver.partitions()
        assert "127.0.0.1:1" in str(info.value)
        assert isinstance(info.value.__cause__, KafkaException)
    else:
        assert driver.partitions() == []
    assert flaky.calls == 2


@pytest.mark.parametrize("client", SPARK_READERS)
@pytest.mark.parametrize("address", ["127.0.0.1:1", "no-such-host.invalid:9092"])
def test_a_broker_it_cannot_reach_is_named_in_the_error(client, address):
    """A refused connection or a host that does not resolve fails within the request timeout
    with the bootstrap address in the message, on either client."""
    options = parse_options(
        {"kafka.bootstrap.servers": address, "client": client, "subscribe": "t",
         "kafka.request.timeout.ms": "3000"},
        streaming=True,
    )
    started = time.monotonic()
    with pytest.raises(KafkaCallError, match=re.escape(address)):
        driver = open_driver(options)
        try:
            driver.partitions()
        finally:
            driver.close()
    assert time.monotonic() - started < 30


def test_a_partition_that_does_not_exist_is_named_in_the_error(
    driver_for, bootstrap_servers, unique_name
):
    """Offsets asked for a partition the topic does not have name the topic and partition."""
    name = unique_name("nopart")
    create_priority_topics(bootstrap_servers, name, 3)
    driver = driver_for(assign=f'{{"{name}-1": [7]}}', **{"kafka.request.timeout.ms": "3000"})
    with pytest.raises(KafkaCallError, match=f"topic {name}-1 partition 7") as info:
        driver.latest(driver.partitions())
    assert bootstrap_servers in str(info.value)
