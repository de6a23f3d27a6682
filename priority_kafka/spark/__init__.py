"""Read priority topics into Spark: the ``priority_kafka`` PySpark data source (PySpark >= 4.2).

::

    from priority_kafka.spark import register

    register(spark)
    stream = (
        spark.readStream.format("priority_kafka")
        .option("kafka.bootstrap.servers", "localhost:9092")
        .option("subscribe", "orders")            # reads orders-0, orders-1, orders-2
        .option("maxPriority", 3)
        .option("maxOffsetsPerTrigger", 50_000)   # split 4:2:1 over the levels, with burst
        .load()
    )

PySpark and pyarrow (the ``[spark]`` extra) load on first use of :func:`register` or
:class:`PriorityKafkaDataSource`, so the pure planning modules (``ranges``, ``admission``)
import without them; ``import priority_kafka`` alone never loads this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from priority_kafka.errors import ConfigError
from priority_kafka.spark.errors import DataLossError, KafkaCallError, ReadTimeoutError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from priority_kafka.spark.source import PriorityKafkaDataSource

__all__ = [
    "DataLossError", "KafkaCallError", "PriorityKafkaDataSource", "ReadTimeoutError", "register",
]


def register(spark: SparkSession) -> None:
    """Register the ``priority_kafka`` format with ``spark`` (once per session is enough)."""
    from pyspark.sql import SparkSession

    from priority_kafka.spark.source import PriorityKafkaDataSource

    if not isinstance(spark, SparkSession):
        raise ConfigError(f"'spark' must be a SparkSession (got {spark!r}).")
    spark.dataSource.register(PriorityKafkaDataSource)


def __getattr__(name: str) -> Any:
    if name == "PriorityKafkaDataSource":
        from priority_kafka.spark.source import PriorityKafkaDataSource

        return PriorityKafkaDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
