"""How much a level's kafka-python client fetches ahead: its share of ``fetch_buffer_bytes``.

kafka-python fetches up to ``max_partition_fetch_bytes`` of every assigned partition that has
nothing fetched waiting, and keeps what it fetched for a paused partition until it is resumed:
what a level holds is about its partitions times that size. A fixed size makes memory grow with
the partitions (an executor over 3 levels of 4 partitions, which pauses partitions all the
time, held 12 fetches of 3 MiB: 177 MB of RSS, 85 MB at the default budget;
``benchmarks.executor_memory``), so a level
splits its share of ``fetch_buffer_bytes`` over its assigned partitions whenever they change,
up to 1 MiB (kafka-python's default) per level, which is what a level reads with fewest
requests (``_level_fetch_bytes``). A size given by the caller is left alone. The level's
prefetch buffer stops taking more from kafka-python once it holds its share too
(``Level.refill``), so a level holds about twice its share at most, whatever the records' size.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["partition_fetch_bytes", "set_partition_fetch_bytes"]

log = logging.getLogger("priority_kafka.consumer._fetch")  # named as before the move

#: Smallest per-partition fetch: below, requests cost more than the memory saved.
MIN_PARTITION_FETCH_BYTES = 64 << 10


def partition_fetch_bytes(level_share: int, partitions: int, ceiling: int) -> int:
    """``max_partition_fetch_bytes`` for a level holding ``level_share`` bytes over
    ``partitions`` assigned partitions: its share split evenly, within
    [MIN_PARTITION_FETCH_BYTES, ``ceiling``]."""
    even = level_share // max(1, partitions)
    return max(MIN_PARTITION_FETCH_BYTES, min(ceiling, even))


def set_partition_fetch_bytes(client: Any, size: int) -> bool:
    """Make ``client``'s next fetch requests ask for ``size`` bytes per partition.

    kafka-python reads its fetcher's ``max_partition_fetch_bytes`` for every request it builds
    (kafka-python 2 and 3); returns False, changing nothing, where that is not so."""
    config = getattr(getattr(client, "_fetcher", None), "config", None)
    if not isinstance(config, dict) or "max_partition_fetch_bytes" not in config:
        return False
    if config["max_partition_fetch_bytes"] != size:
        log.debug("max_partition_fetch_bytes of %r: %d", client, size)
        config["max_partition_fetch_bytes"] = size
    return True
