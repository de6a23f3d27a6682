"""Taking on a partition: its last commit's offset map makes the records it covers skipped.

Shared by the executor's blocking ``run()`` and its ``run_async()``, which read the commits
each in its own way (a blocking call, or awaited on the loop) and hand them here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from priority_kafka._structs import TopicPartition
from priority_kafka._workers import Counters
from priority_kafka.executor._ledger import PartitionLedger
from priority_kafka.offset_map import decode_offset_map

__all__ = ["fetch_committed", "take_on"]

log = logging.getLogger("priority_kafka.executor")


def fetch_committed(consumer: Any, partitions: list[TopicPartition]) -> Any:
    """The commits of ``partitions`` (a blocking read), or the exception reading them raised."""
    try:
        return consumer.fetch_committed(partitions)
    except Exception as exc:
        return exc


def take_on(
    consumer: Any, ledger: PartitionLedger, counters: Counters, exactly_once: bool,
    batch: Mapping[TopicPartition, list[Any]], partitions: list[TopicPartition],
    committed: Mapping[TopicPartition, Any] | Exception,
) -> Mapping[TopicPartition, list[Any]]:
    """Inherit the ``committed`` offsets of ``partitions`` (whose records in ``batch`` start a
    new epoch; or the exception reading them raised), so the records their offset maps say are
    done are skipped. Returns ``batch``, without the records of ``partitions`` when their
    commits could not be read under exactly-once, and of those that came from below their
    commit (both fetched again: ``consumer`` seeks)."""
    if isinstance(committed, Exception):
        if exactly_once:
            log.warning("could not read the commits of %s (%r): trying again",
                        sorted(partitions), committed)
            # Exactly-once must know what the last commit covers, or it would produce its
            # outputs again: fetch these records again and retry.
            for tp in partitions:
                consumer.seek(tp, batch[tp][0].offset)
            return {tp: records for tp, records in batch.items() if tp not in partitions}
        log.warning("could not read the commits of %s (%r): their finished records above "
                    "the committed offsets are handled again", sorted(partitions), committed)
        return batch
    behind = []
    for tp, meta in committed.items():
        records = batch.get(tp)
        if records and records[0].offset < meta.offset:
            behind.append(tp)
            continue
        decoded = decode_offset_map(meta.metadata, meta.offset)
        if decoded.problem is not None:
            counters.add("ignored_offset_maps")
            log.warning("%s[%s]@%s: %s", tp.topic, tp.partition, meta.offset, decoded.problem)
        ledger.inherit(tp, meta.offset, decoded.map)
    if not behind:
        return batch
    # The client fetched from below what the group committed: a position it kept from an
    # earlier assignment or an old answer about the commit (kafka-python: see
    # STALE_OFFSET_FETCH_REUSED and _membership), not a replay asked for. Those records were
    # handled and committed by this partition's owners: handled again they would write their
    # outputs twice, and their commit would take the group's offset back. They are skipped and
    # the partition fetched from its commit, taken on again with its first record.
    for tp in behind:
        records, start = batch[tp], committed[tp].offset
        counters.add("skipped_redeliveries", sum(1 for r in records if r.offset < start))
        log.warning("%s[%s]: records from offset %s came, below its commit at %s: skipped, "
                    "fetching from the commit", tp.topic, tp.partition, records[0].offset, start)
        consumer.seek(tp, start)
    return {tp: records for tp, records in batch.items() if tp not in behind}
