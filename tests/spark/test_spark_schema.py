"""Tests for priority_kafka.spark.schema: the fixed output schema."""

from __future__ import annotations

import pytest
from pyspark.sql.types import IntegerType, StructField, StructType

from priority_kafka.errors import ConfigError
from priority_kafka.spark.schema import check_schema, source_schema

pytestmark = pytest.mark.spark


def test_headers_column_only_with_include_headers():
    """headers sits between timestampType and priority, and only when asked for."""
    assert source_schema(False).fieldNames() == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "priority"
    ]
    assert source_schema(True).fieldNames()[-2:] == ["headers", "priority"]


def test_check_schema_accepts_only_the_fixed_schema():
    """Another schema is a ConfigError showing both; the fixed one passes."""
    check_schema(source_schema(True), include_headers=True)
    with pytest.raises(ConfigError, match=r"fixed schema .*got struct<priority:int>"):
        check_schema(StructType([StructField("priority", IntegerType())]), include_headers=False)
