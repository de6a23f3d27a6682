"""Shared fixtures: one real Apache Kafka broker for the whole session (priority_kafka.testing)
and, for the tests that use Spark, one SparkSession."""

import sys
from collections.abc import Iterator

import pytest

pytest_plugins = ["priority_kafka.pytest_plugin"]


def pytest_addoption(parser):
    group = parser.getgroup("faults", "the fault suite (tests/faults, docs/reliability.md)")
    group.addoption(
        "--faults-full", action="store_true", default=False,
        help="run the fault scenarios at full size (also PRIORITY_KAFKA_FAULTS_FULL=1); "
             "the default is the reduced size the normal suite runs",
    )
    group.addoption(
        "--faults-json", default=None, metavar="PATH",
        help="append each fault scenario's figures to this JSON file "
             "(also PRIORITY_KAFKA_FAULTS_JSON)",
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local[2] SparkSession with the ``priority_kafka`` format registered; stopped at the end."""
    from pyspark.sql import SparkSession

    from priority_kafka.spark import register

    # The data source runs in Python workers, which must use this interpreter and its venv;
    # Spark reads that from the environment when it starts a worker.
    environment = pytest.MonkeyPatch()
    environment.setenv("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("priority-kafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
        environment.undo()
