"""The ``priority_kafka`` Spark data source: options in, batch and stream readers out."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from priority_kafka.errors import MissingTopicsError
from priority_kafka.spark.batch import PriorityKafkaBatchReader
from priority_kafka.spark.options import SourceOptions, parse_options
from priority_kafka.spark.schema import check_schema, source_schema
from priority_kafka.spark.stream import PriorityKafkaStreamReader

__all__ = ["PriorityKafkaDataSource"]


class PriorityKafkaDataSource(DataSource):
    """Reads priority topics (``orders-0`` .. ``orders-<N-1>``) like Spark's Kafka source.

    Options are validated when the DataFrame is defined (``load()``), so a bad option fails
    with a ConfigError naming it before any job runs; see ``docs/spark.md`` for the options.
    """

    @classmethod
    def name(cls) -> str:
        """The format name: ``spark.read.format("priority_kafka")``."""
        return "priority_kafka"

    def schema(self) -> StructType:
        """Spark's Kafka schema plus ``priority``; checks the options common to batch and stream."""
        return source_schema(parse_options(self.options, streaming=None).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader (``spark.read``)."""
        options = parse_options(self.options, streaming=False)
        check_schema(schema, options.include_headers)
        return PriorityKafkaBatchReader(_with_levels(self.options, options, False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The stream reader (``spark.readStream``)."""
        options = parse_options(self.options, streaming=True)
        check_schema(schema, options.include_headers)
        return PriorityKafkaStreamReader(_with_levels(self.options, options, True), schema)

def _with_levels(
    given: Mapping[str, str], options: SourceOptions, streaming: bool
) -> SourceOptions:
    """``options`` (parsed from ``given``) with ``maxPriority``, when not given and topics
    are subscribed by name, the number of levels they have on the broker (asked once, on the
    driver, as the query starts). A pattern, an assignment, or topics without levels yet keep
    the default of 3: as Spark's Kafka source, a read skips topics that do not exist (the
    driver warns naming them)."""
    if not options.topics.subscribe or any(str(k).lower() == "maxpriority" for k in given):
        return options
    from priority_kafka.spark.driver import open_driver  # executors never need it

    driver = open_driver(options)
    try:
        levels = driver.discovered_levels()
    except MissingTopicsError:
        return options
    finally:
        driver.close()
    return parse_options({**given, "maxPriority": str(levels)}, streaming=streaming)
