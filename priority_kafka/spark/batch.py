"""The batch reader: ``spark.read.format("priority_kafka")`` over a closed offset range."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from priority_kafka.errors import ConfigError
from priority_kafka.spark.options import SourceOptions
from priority_kafka.spark.range_reader import read_range
from priority_kafka.spark.ranges import plan_ranges, split_ranges

__all__ = ["PriorityKafkaBatchReader"]


class PriorityKafkaBatchReader(DataSourceReader):
    """Reads every selected partition from ``startingOffsets`` to ``endingOffsets``.

    The offsets are resolved once, when Spark plans the read (on the driver); each offset range
    becomes one task (more with ``minPartitions``), read by :func:`read_range` on an executor.
    Records come highest priority first in the task list, but Spark gives no order across tasks.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self._options = options
        self._schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per non-empty offset range (split further by ``minPartitions``)."""
        from priority_kafka.spark.driver import open_driver  # executors never need it

        driver = open_driver(self._options)
        try:
            topic_partitions = driver.partitions()
            start = driver.resolve("startingOffsets", self._options.starting_offsets,
                                   topic_partitions)
            end = driver.resolve("endingOffsets", self._options.ending_offsets, topic_partitions)
        finally:
            driver.close()
        backwards = sorted(tp for tp in topic_partitions if end[tp] < start[tp])
        if backwards:
            raise ConfigError(
                "'startingOffsets' must not be after 'endingOffsets', but it is for "
                + ", ".join(f"{t} partition {p} ({start[(t, p)]} > {end[(t, p)]})"
                            for t, p in backwards) + "."
            )
        ranges = split_ranges(plan_ranges(start, end), self._options.min_partitions)
        return [InputPartition(offset_range) for offset_range in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one offset range (runs on an executor)."""
        if partition.value is None:  # Spark's stand-in partition when there is nothing to read
            return iter(())
        return read_range(self._options, partition.value, self._schema)
