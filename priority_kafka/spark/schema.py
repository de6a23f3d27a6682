"""The rows the ``priority_kafka`` source produces: Spark's Kafka schema plus ``priority``."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from priority_kafka.errors import ConfigError

__all__ = ["check_schema", "source_schema"]


def source_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (``headers`` only with includeHeaders), then ``priority``.

    ``topic`` is the priority topic (``orders-2``) and ``priority`` its level, 0 the lowest.
    """
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    fields.append(StructField("priority", IntegerType()))
    return StructType(fields)


def check_schema(schema: StructType, include_headers: bool) -> None:
    """Raise ConfigError unless ``schema`` is the source's fixed schema (as Spark's Kafka)."""
    expected = source_schema(include_headers)
    if schema != expected:
        raise ConfigError(
            "The priority_kafka source has a fixed schema and cannot read with a user-specified "
            f"one (expected {expected.simpleString()}, got {schema.simpleString()})."
        )
