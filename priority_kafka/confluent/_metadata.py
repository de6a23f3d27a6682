"""Where the confluent PriorityConsumer asks the cluster's metadata.

Never of the consumer whose rebalance callback is running: confluent-kafka-python (2.16) keeps
one call state per client and thread, which a consumer's ``list_topics()`` or ``cluster_id()``
sets and then clears; the next callback served in the same ``consume()`` or ``close()`` finds
none and the process aborts (``CallState_get: Assertion `cs != NULL' failed``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaException, Producer

from priority_kafka._checks import shown
from priority_kafka.confluent._config import InvalidArgError
from priority_kafka.errors import ConfigError, MissingTopicsError
from priority_kafka.naming import check_subscription, common_levels

__all__ = [
    "MetadataClients", "check_level_topics", "discover_levels", "listed_topics",
    "partition_counts",
]

_log = logging.getLogger(__name__)

# How long a callback waits for the cluster's metadata, and (with something to serve
# meanwhile) in slices of how long.
_TIMEOUT_S = 10.0
_SLICE_S = 0.25
# How long subscribe() asks again while the metadata cannot be had (a broker down under the
# request): Java's default.api.timeout.ms, as the kafka-python front-end. A cluster that
# cannot be reached at all is named at once by the serving LoginWatch, not after this. In the
# chaos soak a member started during a node's cut-off died of 10 s of "Broker transport
# failure".
SUBSCRIBE_TIMEOUT_S = 60.0


class _Level(Protocol):
    consumer: Any
    closed: bool


def partition_counts(
    client: Any, serve: Callable[[], None] | None = None, timeout_s: float = _TIMEOUT_S,
) -> dict[str, int]:
    """Every topic's partition count, from ``client``'s metadata (:func:`listed_topics`)."""
    topics = listed_topics(client, serve, timeout_s)
    return {name: len(topic.partitions) for name, topic in topics.items()}


def listed_topics(
    client: Any, serve: Callable[[], None] | None = None, timeout_s: float = _TIMEOUT_S,
) -> dict[str, Any]:
    """``client.list_topics().topics`` within ``timeout_s``. With ``serve``, waits in slices,
    asking again after a failure, and calls it between them: a client serving its callbacks
    there (errors, log lines) raises at once when the cluster cannot be reached (LoginWatch),
    rather than after the whole wait."""
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        wait = remaining if serve is None else min(_SLICE_S, remaining)
        try:
            topics = client.list_topics(timeout=max(wait, 0.01)).topics
            break
        except KafkaException:
            if serve is None or remaining <= wait:
                raise
            serve()
    return dict(topics)


def check_level_topics(
    client: Any, topics: Sequence[str], max_priority: int, wait_for_topics: bool,
    serve: Callable[[], None] | None = None,
) -> None:
    """Check a subscription to logical ``topics`` (``^regex`` ones too) against the topics
    ``client`` lists (naming.check_subscription): unread levels are an InvalidArgError,
    missing ones a MissingTopicsError (as is), or with ``wait_for_topics`` a warning.
    ``serve`` as for :func:`partition_counts`; with it, asks for the metadata again for up to
    :data:`SUBSCRIBE_TIMEOUT_S` (without, one wait of the callbacks' bound: nothing would
    name an unreachable cluster sooner)."""
    names = partition_counts(client, serve, _TIMEOUT_S if serve is None else SUBSCRIBE_TIMEOUT_S)
    try:
        for pattern in (t[1:] for t in topics if t.startswith("^")):
            check_subscription((), pattern, names, max_priority, setting="max.priority")
        waiting = check_subscription(
            [t for t in topics if not t.startswith("^")], None, names, max_priority,
            wait_for_topics, setting="max.priority",
        )
    except MissingTopicsError:
        raise
    except ConfigError as exc:
        raise InvalidArgError(str(exc)) from exc
    for warning in waiting:
        _log.warning("%s; waiting for them (wait.for.topics)", warning)


def discover_levels(connection: Mapping[str, Any], topics: Sequence[str]) -> int:
    """The number of levels the logical ``topics`` have on the broker (``orders-0`` ..
    ``orders-<N-1>``, contiguous; each topic as many), asked by a producer of ``connection``
    made for it (it joins no group and creates no topic). A ``^regex`` has no levels to
    discover. Raises MissingTopicsError naming topics without levels."""
    if isinstance(topics, str) or not isinstance(topics, Sequence) or not topics or any(
        not isinstance(t, str) or t.startswith("^") for t in topics
    ):
        raise InvalidArgError(
            "'max.priority' is required unless 'topics' is a list of logical topics "
            f"to take the levels from (got {shown(topics)})."
        )
    names = partition_counts(Producer(dict(connection)))
    try:
        return common_levels(topics, names, setting="max.priority", advice="make a consumer "
                             "per number of levels, or give 'max.priority'")
    except MissingTopicsError:
        raise
    except ConfigError as exc:
        raise InvalidArgError(str(exc)) from exc


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
