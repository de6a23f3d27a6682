"""The one place the Spark source creates kafka-python consumers, on the driver and executors."""

from __future__ import annotations

from typing import Any

from priority_kafka._kafka import KafkaConsumer, honour_auto_create_setting
from priority_kafka.spark.options import SourceOptions

__all__ = ["new_consumer"]

# Larger fetches than kafka-python's 1 MiB per partition: a range reader drains one partition
# as fast as it can, and fewer round trips matter more there than memory.
_READ_DEFAULTS: dict[str, Any] = {"max_partition_fetch_bytes": 8 * 1024 * 1024}


def new_consumer(options: SourceOptions, **settings: Any) -> KafkaConsumer:
    """A consumer outside any group that never commits nor resets offsets by itself.

    ``options.kafka_params`` (the ``kafka.*`` options) override the defaults; ``settings``
    override both.
    """
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
    return honour_auto_create_setting(KafkaConsumer(**configs))
