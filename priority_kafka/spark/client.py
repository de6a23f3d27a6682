"""The one place the Spark source creates Kafka consumers, on the driver and executors.

The driver and executors use the library the ``client`` option names: kafka-python
(:func:`new_consumer`) or confluent-kafka (:func:`new_confluent_consumer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from priority_kafka.spark.options import SourceOptions

if TYPE_CHECKING:
    from priority_kafka.kafka_python._kafka import KafkaConsumer

__all__ = ["new_confluent_consumer", "new_consumer"]

# Larger fetches than the clients' 1 MiB per partition: a range reader drains one partition
# as fast as it can, and fewer round trips matter more there than memory.
_PARTITION_FETCH_BYTES = 8 * 1024 * 1024
_READ_DEFAULTS: dict[str, Any] = {"max_partition_fetch_bytes": _PARTITION_FETCH_BYTES}
# librdkafka reads read_committed by default; Java and kafka-python read_uncommitted, and
# kafka.isolation.level means the same whatever the client.
_LIBRDKAFKA_READ_DEFAULTS: dict[str, Any] = {
    "max.partition.fetch.bytes": _PARTITION_FETCH_BYTES,
    "isolation.level": "read_uncommitted",
    # Once 100k messages are queued librdkafka pauses the partition's fetches this long (1 s by
    # default), which idled every large range read (one 400k partition: 160k -> 430k rec/s).
    "fetch.queue.backoff.ms": 10,
}
# librdkafka refuses a consumer without group.id even if it never joins; these never do:
# range reads assign their partition and the driver only looks up metadata and offsets (its
# commits go through consumers given a level's group id).
_UNUSED_GROUP_ID = "priority-kafka-spark-reader"


def new_consumer(options: SourceOptions, **settings: Any) -> KafkaConsumer:
    """A consumer outside any group that never commits nor resets offsets by itself.

    ``options.kafka_params`` (the ``kafka.*`` options) override the defaults; ``settings``
    override both.
    """
    # Imported here: executors reading with confluent never load kafka-python (a third of
    # a second of every Spark Python worker's start).
    from priority_kafka.kafka_python._kafka import (
        KafkaConsumer,
        honour_auto_create_setting,
        with_client_defaults,
    )

    configs: dict[str, Any] = {
        **_READ_DEFAULTS,
        **options.kafka_params,
        "bootstrap_servers": [s.strip() for s in options.bootstrap_servers.split(",") if s.strip()],
        "group_id": None,
        "enable_auto_commit": False,
        # Reads seek to exact offsets; a vanished offset must surface as data loss, never as
        # a silent jump, so kafka-python raises OffsetOutOfRangeError instead of resetting.
        "auto_offset_reset": "none",
        # Reading never creates a topic (kafka-python's default would, on a metadata request
        # for a missing one).
        "allow_auto_create_topics": False,
        **settings,
    }
    return honour_auto_create_setting(KafkaConsumer(**with_client_defaults(configs)))


def new_confluent_consumer(
    options: SourceOptions, group_id: str | None = None, **settings: Any
) -> Any:
    """A confluent-kafka ``Consumer`` with the guarantees of :func:`new_consumer`.

    It never joins ``group_id`` (range reads assign; the driver only commits with it);
    ``settings`` (librdkafka properties, e.g. ``error_cb``) are added.
    ``options.confluent_params`` (the ``kafka.*`` options mapped to librdkafka) override the
    defaults, never the fixed settings below.
    """
    from confluent_kafka import Consumer

    return Consumer({
        **_LIBRDKAFKA_READ_DEFAULTS,
        **options.confluent_params,
        "bootstrap.servers": options.bootstrap_servers,
        "group.id": group_id or _UNUSED_GROUP_ID,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # A vanished offset is reported (an _AUTO_OFFSET_RESET error), never silently skipped.
        "auto.offset.reset": "error",
        "allow.auto.create.topics": False,
        # The end of the log is reported, so offsets consumed without a record (transaction
        # markers, compacted records at the end) are noticed as kafka-python's position() does.
        "enable.partition.eof": True,
        **settings,
    })
