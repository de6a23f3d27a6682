"""Read priority topics into Spark: the ``priority_kafka`` PySpark data source (PySpark >= 4.2).

::

    from priority_kafka.spark import register

    register(spark)
    stream = (
        spark.readStream.format("priority_kafka")
        .option("kafka.bootstrap.servers", "localhost:9092")
        .option("subscribe", "orders")            # reads orders-0, orders-1, orders-2
        .option("maxPriority", 3)
        .option("maxOffsetsPerTrigger", 50_000)   # split 29/14/7 over the levels, with burst
        .load()
    )

This package imports PySpark and pyarrow (the ``[spark]`` extra); ``import priority_kafka``
alone never does.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from priority_kafka.spark.errors import DataLossError, ReadTimeoutError
from priority_kafka.spark.source import PriorityKafkaDataSource

__all__ = ["DataLossError", "PriorityKafkaDataSource", "ReadTimeoutError", "register"]


def register(spark: SparkSession) -> None:
    """Register the ``priority_kafka`` format with ``spark`` (once per session is enough)."""
    if not isinstance(spark, SparkSession):
        from priority_kafka.errors import ConfigError

        raise ConfigError(f"'spark' must be a SparkSession (got {spark!r}).")
    spark.dataSource.register(PriorityKafkaDataSource)
