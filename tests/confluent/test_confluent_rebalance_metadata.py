"""Metadata asked from inside a rebalance callback of the confluent PriorityConsumer.

confluent-kafka-python (2.16) keeps one call state per client and thread; a consumer's
``list_topics()`` sets and then clears it, so when one of the consumer's own rebalance
callbacks calls it, the next callback served in the same ``consume()`` or ``close()`` finds no
call state and the process aborts (``CallState_get: Assertion `cs != NULL' failed``). Each
level's ``on_assign`` asks for partition counts (partitions added later start at their
beginning): it must ask another client. Seen in CI as a benchmark contender dying at close."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from priority_kafka import create_priority_topics
from priority_kafka.confluent import PriorityConsumer, _added
from priority_kafka.confluent._added import assign_callback

# Subscribes, waits until every level's group has given it its partitions (so each level's
# assignment waits, unserved, in its queue: nothing consumed yet), then closes: close() serves
# each level's on_assign, then its revocation, in one call.
CHILD = """
import sys, time
from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient
from priority_kafka.confluent import PriorityConsumer

bootstrap, topic, group = sys.argv[1:4]
consumer = PriorityConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                             "max.priority": 3, "auto.offset.reset": "earliest"})
consumer.subscribe([topic])
admin = AdminClient({"bootstrap.servers": bootstrap})
groups = [f"{group}-{level}" for level in range(3)]
deadline = time.monotonic() + 60
def assigned(future):
    try:
        d = future.result()
    except KafkaException as exc:  # the group's coordinator is still loading, say
        return False
    return (d.state == ConsumerGroupState.STABLE and bool(d.members)
            and bool(d.members[0].assignment.topic_partitions))
while True:
    described = admin.describe_consumer_groups(groups).values()
    if all([assigned(future) for future in described]):
        break
    assert time.monotonic() < deadline, described
    time.sleep(0.1)
consumer.close()
print("closed")
"""


@pytest.mark.integration
def test_closing_with_every_level_assignment_unserved_closes(
    bootstrap_servers: str, unique_name: Callable[[str], str]
) -> None:
    """close() serves each level's queued assignment and then its revocation, in one call:
    the consumer closes, without asking the closing client anything (it refuses:
    ``Broker handle destroyed for termination``) nor aborting the process."""
    topic = unique_name("meta")
    create_priority_topics(bootstrap_servers, topic, 3, num_partitions=2)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, bootstrap_servers, topic, unique_name("g")],
        capture_output=True, text=True, timeout=120,
    )
    assert child.returncode == 0 and "closed" in child.stdout, (
        f"exit {child.returncode}: {child.stderr[-2000:]}"
    )


class _Assigned:
    """A level's consumer as an on_assign sees it: its metadata must not be asked for."""

    def __init__(self) -> None:
        self.assigned: list[Any] = []

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("list_topics() asked of the consumer being assigned")

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        return [TopicPartition(tp.topic, tp.partition, OFFSET_INVALID) for tp in partitions]

    def assignment(self) -> list[Any]:
        return list(self.assigned)

    def assign(self, partitions: list[Any]) -> None:
        self.assigned = list(partitions)


def test_on_assign_takes_partition_counts_from_elsewhere_and_nothing_while_closing() -> None:
    """The level's on_assign learns partition counts from the client it is given, never from
    the consumer being assigned; a partition added since the first assignment, never
    committed, is assigned from its beginning; while closing, nothing is asked at all."""
    counts = {"t-0": 2}
    asked: list[str] = []
    closing = [False]

    def counts_from_elsewhere() -> dict[str, int]:
        asked.append("counts")
        return counts

    user_calls: list[int] = []
    on_assign = assign_callback(lambda consumer, parts: user_calls.append(len(parts)), False,
                                counts_from_elsewhere, lambda: closing[0])
    consumer = _Assigned()
    on_assign(consumer, [TopicPartition("t-0", 0), TopicPartition("t-0", 1)])
    assert asked == ["counts"] and consumer.assigned == []  # the first: nothing added
    added = [TopicPartition("t-0", 0), TopicPartition("t-0", 2)]
    on_assign(consumer, added)
    assert [(tp.partition, tp.offset) for tp in consumer.assigned] == [
        (0, OFFSET_INVALID), (2, OFFSET_BEGINNING)]
    closing[0] = True
    on_assign(consumer, [TopicPartition("t-0", 3)])
    assert user_calls == [2, 2, 1] and [tp.partition for tp in consumer.assigned] == [0, 2]


class _CoordinatorMoving(_Assigned):
    """A level's consumer whose committed() fails while its group's coordinator moves."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        if self.failures:
            self.failures -= 1
            raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR,
                                            "Failed to get committed offsets: Not coordinator"))
        return super().committed(partitions, timeout)


@pytest.mark.parametrize("failures", [2, 1000])
def test_an_added_partitions_commit_unreadable_while_the_coordinator_moves(
    failures: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """committed() refused with NOT_COORDINATOR (a coordinator moving under a broker fault)
    inside on_assign escaped the callback and ended the consume() serving it: a chaos-soak
    member died of it. It is tried again; still refused past the bound, the added partition
    keeps librdkafka's own start, with a warning, and the assignment goes through."""
    monkeypatch.setattr(_added, "_TIMEOUT_S", 1.0)
    monkeypatch.setattr(_added, "_RETRY_S", 0.01)
    on_assign = assign_callback(lambda consumer, parts: None, False, lambda: {"t-0": 2},
                                lambda: False)
    consumer = _CoordinatorMoving(failures)
    # The first assignment is the reference (2 partitions); partition 2 is added later.
    on_assign(consumer, [TopicPartition("t-0", 0), TopicPartition("t-0", 1)])
    on_assign(consumer, [TopicPartition("t-0", 0), TopicPartition("t-0", 2)])
    if failures == 2:
        assert [(tp.partition, tp.offset) for tp in consumer.assigned] == [
            (0, OFFSET_INVALID), (2, OFFSET_BEGINNING)]
    else:
        assert consumer.assigned == []  # librdkafka assigns its own list, unchanged
        assert "could not read the commits of added partitions ['t-0-2']" in caplog.text


class _UnstableCommit(_Assigned):
    """A level's consumer whose committed() answers partition 2 with an error of its own."""

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        # As librdkafka's: a TopicPartition's error cannot be set from Python.
        return [SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=OFFSET_INVALID,
                                error=KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT)
                                if tp.partition == 2 else None) for tp in partitions]


def test_an_added_partition_whose_commit_could_not_be_read_is_not_read_from_its_beginning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """committed() answers an added partition with an error of its own (no offset): it is not
    taken for a partition never committed (that would read it again from its beginning, every
    output since made twice); it keeps librdkafka's start, with a warning."""
    on_assign = assign_callback(lambda consumer, parts: None, False, lambda: {"t-0": 2},
                                lambda: False)
    consumer = _UnstableCommit()
    on_assign(consumer, [TopicPartition("t-0", 0), TopicPartition("t-0", 1)])
    on_assign(consumer, [TopicPartition("t-0", 2), TopicPartition("t-0", 3)])
    assert [(tp.partition, tp.offset) for tp in consumer.assigned] == [
        (2, OFFSET_INVALID), (3, OFFSET_BEGINNING)]
    assert "could not read the commits of added partitions ['t-0-2 (" in caplog.text


@pytest.mark.parametrize("levels", [1, 3])
def test_metadata_is_asked_of_a_client_other_than_the_rebalancing_level(levels: int) -> None:
    """Another open level's consumer, or a producer kept for it when there is none."""
    consumer = PriorityConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                                 "max.priority": levels})
    try:
        rebalancing = consumer._levels[0]
        client = consumer._metadata.other_than(rebalancing)
        assert client is not rebalancing.consumer
        if levels > 1:
            assert client is consumer._levels[1].consumer
        else:
            assert isinstance(client, Producer)
            assert consumer._metadata.other_than(rebalancing) is client  # kept
        assert consumer._metadata.other_than(None) is consumer._levels[0].consumer
    finally:
        consumer.close()


def test_subscribe_asks_for_the_metadata_again_past_the_callbacks_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A member started while a node is cut off: its subscribe()'s metadata request failed
    with a transport error for 10 s (the callbacks' bound) and the process died in the chaos
    soak. With something to serve meanwhile (the consumer's LoginWatch names an unreachable
    cluster at once) it asks again for up to Java's default.api.timeout.ms."""
    from confluent_kafka import KafkaError, KafkaException

    from priority_kafka.confluent import _metadata

    clock = [0.0]

    class Down:
        """Fails for 20 s of the (fake) clock, then lists the level topics."""

        def list_topics(self, timeout: float) -> Any:
            clock[0] += timeout
            if clock[0] < 20.0:
                raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))
            topic = type("T", (), {"partitions": {0: None}})()
            return type("M", (), {"topics": {"t-0": topic, "t-1": topic}})()

    served: list[float] = []
    monkeypatch.setattr(_metadata.time, "monotonic", lambda: clock[0])
    _metadata.check_level_topics(Down(), ["t"], 2, False, lambda: served.append(clock[0]))
    assert clock[0] >= 20.0 and len(served) >= 70
    clock[0] = 0.0
    with pytest.raises(KafkaException, match="Failed to get metadata"):
        _metadata.check_level_topics(Down(), ["t"], 2, False)  # nothing to serve: one wait
