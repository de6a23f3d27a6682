"""Tests for priority_kafka.spark (the package): its exports and register()."""

from __future__ import annotations

import subprocess
import sys

import pytest

import priority_kafka.spark as spark_package
from priority_kafka.errors import ConfigError, PriorityKafkaError

pytestmark = pytest.mark.spark


def test_exports_are_exactly_the_public_names():
    """The package exports the data source, register() and its three errors."""
    assert sorted(spark_package.__all__) == [
        "DataLossError", "KafkaCallError", "PriorityKafkaDataSource", "ReadTimeoutError",
        "register",
    ]
    assert issubclass(spark_package.KafkaCallError, PriorityKafkaError)
    assert issubclass(spark_package.DataLossError, PriorityKafkaError)
    assert issubclass(spark_package.ReadTimeoutError, TimeoutError)


def test_register_needs_a_spark_session():
    """register() names what it got when it is not a SparkSession."""
    with pytest.raises(ConfigError, match="'spark' must be a SparkSession"):
        spark_package.register("spark")


def test_register_makes_the_format_available(spark):
    """After register(), spark.read.format("priority_kafka") resolves to this source."""
    spark_package.register(spark)  # registering again is harmless
    frame = spark.read.format("priority_kafka").option("kafka.bootstrap.servers", "x:1").option(
        "subscribe", "orders"
    ).load()
    assert frame.columns[-1] == "priority"


def test_planning_modules_and_the_package_load_no_pyspark():
    """Importing the package and its pure planning modules leaves PySpark unloaded."""
    probe = (
        "import sys, priority_kafka.spark, priority_kafka.spark.admission, "
        "priority_kafka.spark.ranges; print('pyspark' in sys.modules, 'pyarrow' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False", "False"]
