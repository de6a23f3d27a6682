"""The stream reader: ``spark.readStream.format("priority_kafka")`` with priority admission.

Spark calls the planning methods (``initialOffset``, ``latestOffset``, ``partitions``,
``commit``) on the driver, in one long-lived Python worker per query; ``read`` runs on executors.
Offsets live in Spark's checkpoint, so a restarted query resumes exactly where the last
committed batch ended (each record reaches an idempotent or transactional sink once, e.g. the
file sink). The burst windows are not checkpointed: after a restart they start empty.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from priority_kafka.errors import ConfigError
from priority_kafka.spark.admission import AdmissionControl
from priority_kafka.spark.options import SourceOptions
from priority_kafka.spark.range_reader import read_range
from priority_kafka.spark.ranges import (
    PartitionOffsets,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    split_ranges,
)

if TYPE_CHECKING:
    from priority_kafka.spark.driver import KafkaDriver

__all__ = ["PriorityKafkaStreamReader"]

log = logging.getLogger(__name__)


class PriorityKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches whose size per priority level follows the distributor and capacity burst.

    With ``maxOffsetsPerTrigger`` M, every batch admits at most M records: each level its
    reserved share of M (exponential: 29/14/7 of 50 over three levels) while it has backlog,
    and after a level has taken less than its share for a whole window, its unused share goes to
    the highest level that keeps using all of its own. Within a level, partitions share the
    level's count in proportion to their backlog. Without a limit (or under Trigger.Once)
    a batch takes everything available. Trigger.AvailableNow reads up to the offsets available
    when the query starts, in batches of the same limited size, then stops.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self._options = options
        self._schema = schema
        self._admission = AdmissionControl(options.max_priority, options.new_burst)
        self._driver: KafkaDriver | None = None
        self._target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None

    def initialOffset(self) -> dict:
        """The starting offsets of a new query (``startingOffsets``, latest by default)."""
        driver = self._kafka()
        partitions = driver.partitions()
        start = driver.resolve("startingOffsets", self._options.starting_offsets, partitions)
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)``, or everything available without that option."""
        limit = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the offsets available now as the end of a Trigger.AvailableNow run."""
        driver = self._kafka()
        self._target = driver.latest(driver.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next batch: ``start`` plus what admission control lets in."""
        if isinstance(limit, ReadMaxRows):
            max_rows: int | None = limit.max_rows
        elif isinstance(limit, ReadAllAvailable):
            max_rows = None
        else:
            raise ConfigError(
                f"The priority_kafka source supports ReadMaxRows and ReadAllAvailable limits "
                f"(got {limit!r})."
            )
        driver = self._kafka()
        position = offsets_from_json(start)
        partitions = driver.partitions()
        latest = driver.latest(partitions)
        driver.check_start(position, latest)
        new = [tp for tp in partitions if tp not in position]
        begin = {tp: min(offset, latest[tp]) for tp, offset in position.items() if tp in latest}
        begin.update(driver.earliest(new))
        if self._target is not None:
            target = self._target
            latest = {tp: min(offset, target.get(tp, begin[tp])) for tp, offset in latest.items()}
        self._latest = latest
        admission = self._admission.admit(begin, latest, max_rows)
        if any(admission.admitted.values()):
            log.info(
                "priority_kafka admits %s of available %s (quotas %s, bursting level %s)",
                admission.admitted, admission.available, admission.quotas,
                admission.bursting_level,
            )
        return offsets_to_json(admission.end)

    def reportLatestOffset(self) -> dict | None:
        """The latest offsets seen by the last ``latestOffset`` call, for the query progress."""
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The batch's offset ranges; partitions new since ``start`` begin at their earliest."""
        begin = offsets_from_json(start)
        stop = offsets_from_json(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin.update(self._kafka().earliest(new))
        ranges = split_ranges(plan_ranges(begin, stop), self._options.min_partitions)
        return [InputPartition(offset_range) for offset_range in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one offset range (runs on an executor)."""
        return read_range(self._options, partition.value, self._schema)

    def commit(self, end: dict) -> None:
        """With ``kafka.group.id``, commit the processed offsets to the per-level groups."""
        if self._options.group_id is not None:
            self._kafka().commit(offsets_from_json(end))

    def stop(self) -> None:
        """Close the driver's Kafka connections."""
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    def _kafka(self) -> KafkaDriver:
        # Created on first use: Spark also builds this reader in short-lived planning workers
        # and pickles it to executors, which never need the driver's connections.
        if self._driver is None:
            from priority_kafka.spark.driver import open_driver  # executors never need it

            self._driver = open_driver(self._options)
        return self._driver
