"""A confluent PriorityConsumer's commit of what its levels stored (``commit()`` without
arguments): each level with an assignment commits its own stored offsets in its own group."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

__all__ = ["commit_stored"]


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
