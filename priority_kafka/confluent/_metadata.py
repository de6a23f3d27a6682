"""Where the confluent PriorityConsumer asks the cluster's metadata.

Never of the consumer whose rebalance callback is running: confluent-kafka-python (2.16) keeps
one call state per client and thread, which a consumer's ``list_topics()`` or ``cluster_id()``
sets and then clears; the next callback served in the same ``consume()`` or ``close()`` finds
none and the process aborts (``CallState_get: Assertion `cs != NULL' failed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from confluent_kafka import Producer

__all__ = ["MetadataClients", "partition_counts"]

# How long a callback waits for the cluster's metadata.
_TIMEOUT_S = 10.0


class _Level(Protocol):
    consumer: Any
    closed: bool


def partition_counts(client: Any) -> dict[str, int]:
    """Every topic's partition count, from ``client``'s metadata (``list_topics``)."""
    topics = client.list_topics(timeout=_TIMEOUT_S).topics
    return {name: len(topic.partitions) for name, topic in topics.items()}


class MetadataClients:
    """Picks the client to ask: another open level's consumer than the rebalancing one, or
    else (one level, or the others closed) a producer made for it once."""

    __slots__ = ("_connection", "_levels", "_producer")

    def __init__(self, levels: Sequence[_Level], connection: Mapping[str, Any]) -> None:
        self._levels = levels
        self._connection = dict(connection)
        self._producer: Producer | None = None

    def __repr__(self) -> str:
        return f"MetadataClients(producer={self._producer is not None})"

    def other_than(self, rebalancing: _Level | None) -> Any:
        """A client to ask the cluster's metadata, not ``rebalancing``'s consumer."""
        for lv in self._levels:
            if lv is not rebalancing and not lv.closed:
                return lv.consumer
        if self._producer is None:
            self._producer = Producer(self._connection)
        return self._producer

    def partition_counts(self, rebalancing: _Level) -> dict[str, int]:
        """:func:`partition_counts` of a client other than ``rebalancing``'s consumer."""
        return partition_counts(self.other_than(rebalancing))

    def close(self) -> None:
        """Drop the producer (it never sends: nothing to flush)."""
        self._producer = None
