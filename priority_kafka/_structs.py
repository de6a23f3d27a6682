"""TopicPartition and OffsetAndMetadata for the client-neutral core, without kafka-python.

They have kafka-python's field names, defaults, equality and hashing (all are tuples), so a
dict keyed by one finds the other and the core takes either family's partitions as they come;
only kafka-python's own calls insist on its classes (``isinstance``), and its adapter
(``priority_kafka.kafka_python._client``) converts there. Importing kafka-python costs a process
about 13 MB and 0.1 s, which a confluent-kafka executor (or a Spark worker) need not pay.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["OffsetAndMetadata", "TopicPartition"]


class TopicPartition(NamedTuple):
    """A topic and partition."""

    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """A committed offset, its metadata string and its leader epoch (-1: unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1
