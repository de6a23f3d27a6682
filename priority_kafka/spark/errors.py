"""Errors of the Spark data source, under priority_kafka's root error."""

from __future__ import annotations

from priority_kafka.errors import PriorityKafkaError

__all__ = ["DataLossError", "KafkaCallError", "ReadTimeoutError"]


class DataLossError(PriorityKafkaError, RuntimeError):
    """Records a query must read are gone (retention, compaction, deleted records or topic).

    Raised only with ``failOnDataLoss`` true; the message names the topic, partition and
    offsets. With ``failOnDataLoss`` false the records are skipped with a warning instead.
    """


class ReadTimeoutError(PriorityKafkaError, TimeoutError):
    """Reading an offset range made no progress for ``kafkaConsumer.pollTimeoutMs``."""


class KafkaCallError(PriorityKafkaError, RuntimeError):
    """A Kafka call of the source's driver failed (broker unreachable, unknown host or partition,
    refused login, ...).

    The message names the bootstrap address and, where the call concerned partitions, the topic
    and partition; the client's own error is chained as ``__cause__``.
    """
