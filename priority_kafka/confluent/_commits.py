"""A confluent PriorityConsumer's commit of what its levels stored (``commit()`` without
arguments): each level with an assignment commits its own stored offsets in its own group;
and the executor's reading of what ``committed()`` answered."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from priority_kafka._structs import OffsetAndMetadata
from priority_kafka._structs import TopicPartition as Partition

__all__ = ["commit_stored", "committed_offsets"]


def commit_stored(consumers: Iterable[Any], asynchronous: bool) -> list[TopicPartition]:
    """Commit every assigned level's stored offsets; the committed partitions (synchronous).

    A level with nothing stored is no failure while another level commits: librdkafka's
    ``_NO_OFFSET`` is raised only when no level had anything to commit.
    """
    committed: list[TopicPartition] = []
    no_offset: KafkaException | None = None
    done = False
    for consumer in consumers:
        if not consumer.assignment():
            continue
        try:
            result = consumer.commit(asynchronous=asynchronous)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                raise
            no_offset = exc
            continue
        done = True
        committed += result or []
    if not done and no_offset is not None:
        raise no_offset
    return committed


def committed_offsets(answer: Iterable[TopicPartition]) -> dict[Partition, OffsetAndMetadata]:
    """The commits in ``committed()``'s ``answer`` (partitions without one left out). A
    partition the coordinator answered with an error raises KafkaException naming it: taken
    for "no commit", its finished records would run again (under exactly-once, their outputs
    twice)."""
    answer = list(answer)
    failed = [(tp, tp.error) for tp in answer if tp.error is not None]
    if failed:
        named = ", ".join(f"{tp.topic}[{tp.partition}]: {error.str()}" for tp, error in failed)
        raise KafkaException(KafkaError(
            failed[0][1].code(), f"could not read the commits of {named}"))
    return {Partition(tp.topic, tp.partition): OffsetAndMetadata(tp.offset, tp.metadata or "", -1)
            for tp in answer if tp.offset >= 0}
