"""The pieces that find a level consumer that lost every broker (confluent._renewal) and the
proxy that makes one (tests/faults/blank_metadata.py); the whole runs in
tests/faults/test_lost_brokers.py."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import KafkaException
from kafka.protocol.metadata import MetadataResponse

from priority_kafka.confluent import PriorityConsumer
from priority_kafka.confluent._config import InvalidArgError
from priority_kafka.confluent._renewal import (
    STATS_INTERVAL_MS,
    BrokerWatch,
    knows_a_broker,
    watch_statistics,
)
from tests.faults.blank_metadata import without_brokers

# Trimmed from librdkafka 2.16 statistics: a consumer with a learned broker, then the same one
# after a Metadata response with no broker (the logical coordinator and the internal broker).
WITH_BROKER = ('{"name":"c#consumer-1","brokers":{"127.0.0.1:9092/1":{"name":"127.0.0.1:9092/1",'
               '"nodeid":1,"nodename":"127.0.0.1:9092","source":"learned","state":"UP"},'
               '"GroupCoordinator":{"nodeid":-1,"source":"logical","state":"UP"},'
               '":0/internal":{"nodeid":-1,"source":"internal","state":"INIT"}}}')
WITHOUT = ('{"name":"c#consumer-1","brokers":{"GroupCoordinator":{"nodeid":-1,'
           '"source":"logical","state":"TRY_CONNECT"},":0/internal":{"nodeid":-1,'
           '"source":"internal","state":"INIT"}}}')
BOOTSTRAP = WITHOUT.replace('"source":"logical"', '"source":"configured"')


def test_a_broker_is_a_learned_or_bootstrap_one() -> None:
    assert knows_a_broker(WITH_BROKER)
    assert knows_a_broker(BOOTSTRAP)  # a re-bootstrap under way
    assert not knows_a_broker(WITHOUT)


def test_the_watch_reports_two_statistics_in_a_row_without_a_broker_once() -> None:
    lost: list[int] = []
    forwarded: list[str] = []
    watch = BrokerWatch(lambda: lost.append(1), forwarded.append)
    for stats in (WITH_BROKER, WITHOUT, WITH_BROKER, WITHOUT):  # never two in a row
        watch(stats)
    assert lost == []
    watch(WITHOUT)
    assert lost == [1]
    watch(WITHOUT)
    assert lost == [1], "reported once per consumer"
    assert len(forwarded) == 6  # the caller's stats_cb gets every one
    new = watch.retire()
    watch(WITHOUT)  # the replaced consumer, closing
    assert (lost, len(forwarded)) == ([1], 6)
    new(WITHOUT)
    new(WITHOUT)
    assert (lost, len(forwarded)) == ([1, 1], 8)


def test_the_callers_stats_cb_gets_statistics_only_when_it_asked_for_them() -> None:
    """The caller's interval stands; without one (or 0) the watch's is set and the caller's
    stats_cb gets nothing; an interval that is no number is left for librdkafka to refuse."""
    def mine(stats: str) -> None:
        pass

    for given, interval, forwarded in [
        ({"statistics.interval.ms": 1000}, 1000, mine),
        ({"statistics.interval.ms": "1000"}, "1000", mine),
        ({}, STATS_INTERVAL_MS, None),
        ({"statistics.interval.ms": 0}, STATS_INTERVAL_MS, None),
        ({"statistics.interval.ms": "soon"}, "soon", None),
    ]:
        config: dict[str, Any] = {"stats_cb": mine, **given}
        assert watch_statistics(config) is forwarded, given
        assert config["statistics.interval.ms"] == interval
    with pytest.raises(TypeError, match=r"expected stats_cb property as a callable.*'nope'"):
        watch_statistics({"stats_cb": "nope"})
    with pytest.raises(KafkaException, match=r"statistics\.interval\.ms"):
        PriorityConsumer({"group.id": "g", "max.priority": 2, "statistics.interval.ms": "soon"})


def test_each_level_sends_statistics_and_renew_level_names_a_bad_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A level assigned by hand has no subscription to take over: it is not replaced, and an
    error says so."""
    consumer = PriorityConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                                 "max.priority": 2})
    try:
        for level in (0, 1):
            config: dict[str, Any] = consumer._by_level[level].config
            assert config["statistics.interval.ms"] == STATS_INTERVAL_MS
            assert isinstance(config["stats_cb"], BrokerWatch)
        for bad in (2, -1, "1", True):
            with pytest.raises(InvalidArgError, match=rf"levels \[0, 1\] \(got {bad!r}\)"):
                consumer.renew_level(bad)  # type: ignore[arg-type]
        consumer.renew_level(1)
        assert consumer._renewals.due == {consumer._by_level[1]: "renew_level() was called"}
        before = consumer._by_level[1].consumer
        with caplog.at_level(logging.ERROR):
            assert consumer.consume(1, 0) == []
        assert consumer._by_level[1].consumer is before and not consumer._renewals.due
        assert "level 1's consumer renew_level() was called, but it has no subscription" in (
            caplog.text)
    finally:
        consumer.close()


@pytest.mark.parametrize("version", range(MetadataResponse.max_version + 1))
def test_the_proxy_empties_only_the_broker_list(version: int) -> None:
    """kafka-python's codec reads the rewritten response: no broker, the rest unchanged."""
    broker, topic = MetadataResponse.MetadataResponseBroker, MetadataResponse.MetadataResponseTopic
    response = MetadataResponse(
        version=version, throttle_time_ms=7, cluster_id="c", controller_id=1,
        brokers=[broker(version=version, node_id=1, host="h1", port=9, rack="r"),
                 broker(version=version, node_id=2, host="h22", port=10, rack=None)],
        topics=[topic(version=version, error_code=0, name="t", is_internal=False,
                      partitions=[])],
    )
    response.with_header(correlation_id=42)
    before = MetadataResponse.decode(response.encode(header=True), version=version,
                                     header=True)
    after = MetadataResponse.decode(without_brokers(response.encode(header=True), version),
                                    version=version, header=True)
    assert len(before.brokers) == 2 and after.brokers == []
    assert after.header.correlation_id == 42
    assert {k: v for k, v in after.to_dict().items() if k != "brokers"} == {
        k: v for k, v in before.to_dict().items() if k != "brokers"}
