"""PriorityProducer: kafka-python's KafkaProducer that routes each record to its priority topic."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

from priority_kafka._checks import MAX_PRIORITY, shown
from priority_kafka._levels import ProducerFront
from priority_kafka._properties import INT, TEXT, kafka_python_kinds, typed_settings
from priority_kafka._topic_levels import TopicLevels
from priority_kafka.config import connection_configs, normalize_keys
from priority_kafka.errors import ConfigError, IllegalStateError
from priority_kafka.kafka_python._kafka import cluster_topics, flush_within, with_client_defaults
from priority_kafka.naming import priority_topic, priority_topics

__all__ = ["PriorityProducer", "create_priority_topics"]

# Far beyond what a broker serves well per topic; the protocol's limit is 2**31 - 1.
MAX_PARTITIONS = 100_000
# The protocol's limit (an int16); a broker also refuses more replicas than it has brokers.
MAX_REPLICATION_FACTOR = 2**15 - 1


#: How each setting given as text converts: ours, KafkaProducer's, and the deprecated ones it
#: still accepts (and warns about).
_SETTING_KINDS = {
    **dict.fromkeys(getattr(KafkaProducer, "DEPRECATED_CONFIGS", ()), TEXT),
    **kafka_python_kinds(KafkaProducer), "max_priority": INT, "default_priority": INT,
}


def _count(name: str, value: object, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ConfigError(
            f"'{name}' must be an integer >= 1 and at most {maximum} (got {shown(value)})."
        )
    return value


_MAX_CACHED_TOPICS = 1024
#: ``send()``'s priority when none is given (an explicit None is refused).
DEFAULT: Any = object()


def _check_level(name: str, value: object, max_priority: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < max_priority:
        raise ConfigError(
            f"'{name}' must be an integer in [0, {max_priority}) for max_priority={max_priority} "
            f"(got {shown(value)})."
        )
    return value


class PriorityProducer(ProducerFront):
    """Send records to priority topics with kafka-python's ``KafkaProducer`` API.

    ``send("orders", value, priority=2)`` sends to the Kafka topic ``orders-2``. One
    ``KafkaProducer`` serves every level, so its batching, retries, idempotence and ordering
    guarantees (per partition) hold unchanged.

    Args:
        max_priority: number of priority levels (required; also ``max.priority``).
        default_priority: level used when ``send`` is given none (default 0, the lowest).
        **configs: every ``KafkaProducer`` setting, by Python name or Java-style dotted name.

    Never creates a level topic: ``send`` checks that the level topic exists, from the
    cluster's topic list, asked when a topic is first sent to, when a level not seen is
    named and every 5 minutes (sends to known levels are a dict look-up).
    """

    def __init__(self, **configs: Any) -> None:
        # A string value (a .properties file, a command line) becomes its setting's type.
        configs = typed_settings(configs, _SETTING_KINDS, (ConfigError, "PriorityProducer"))
        normalized = normalize_keys(configs)
        max_priority = _count("max_priority", normalized.pop("max_priority", None), MAX_PRIORITY)
        self._max_priority = max_priority
        self._default_priority = _check_level(
            "default_priority", normalized.pop("default_priority", 0), max_priority
        )
        self._producer = KafkaProducer(**with_client_defaults(normalized))
        self._closed = False
        connection = connection_configs(normalized)
        self._topic_levels = TopicLevels(lambda: cluster_topics(connection))
        # Level topic names per logical topic, each checked once (name and existence) until
        # _routes_until: building and validating the name was about 13% of send()'s CPU.
        self._routes: dict[str, dict[int, str]] = {}
        self._routes_until = -float("inf")

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        priority: int = DEFAULT,
    ) -> Any:
        """Send a record to ``<topic>-<priority>``; returns kafka-python's ``FutureRecordMetadata``.

        Without ``priority``, ``default_priority``. A priority outside ``[0, max_priority)``
        (None included) raises ``ValueError``, and one whose level topic does not exist
        :class:`~priority_kafka.MissingTopicsError` naming the topic's levels; nothing is sent.
        """
        if self._closed:
            raise IllegalStateError("PriorityProducer is closed.")
        level = self._default_priority if priority is DEFAULT else _check_level(
            "priority", priority, self._max_priority
        )
        routes = self._routes.get(topic) if isinstance(topic, str) else None
        name = routes.get(level) if routes is not None else None
        if name is None or time.monotonic() > self._routes_until:
            name = self._route(topic, level)
        return self._producer.send(
            name, value=value, key=key, headers=headers,
            partition=partition, timestamp_ms=timestamp_ms,
        )

    def _route(self, topic: str, level: int) -> str:
        """``topic``'s level topic, checked (name, existence) and remembered."""
        name = priority_topic(topic, level)
        if time.monotonic() > self._routes_until or len(self._routes) >= _MAX_CACHED_TOPICS:
            self._routes.clear()  # stale, or a bound for ever-new topic names
        levels = self._topic_levels.check(topic, level)
        self._routes_until = self._topic_levels.fresh_until()
        self._routes[topic] = {n: f"{topic}-{n}" for n in levels if n < self._max_priority}
        return name

    def partitions_for(self, topic: str) -> dict[int, set[int]]:
        """Partition ids of every level of a logical topic: ``{level: {0, 1, ...}}``, highest first.

        Deviation: kafka-python returns one set for one topic; a logical topic has one per level.
        Raises MissingTopicsError, naming the topic's levels, if one does not exist (asking
        kafka-python for its partitions would create it).
        """
        for level in range(self._max_priority):
            self._topic_levels.check(topic, level)
        return {
            level: self._producer.partitions_for(name)
            for level, name in zip(
                range(self._max_priority - 1, -1, -1),
                priority_topics(topic, self._max_priority),
                strict=True,
            )
        }

    def flush(self, timeout: float | None = None) -> None:
        """Block until every buffered record is sent; KafkaTimeoutError if some are not
        within ``timeout`` seconds in all (kafka-python's own flush gives each batch the whole
        timeout)."""
        flush_within(self._producer, timeout)

    def metrics(self, raw: bool = False) -> dict[str, Any]:
        """kafka-python's producer metrics."""
        return self._producer.metrics(raw=raw)

    def bootstrap_connected(self) -> bool:
        """True when connected to a bootstrap server."""
        return self._producer.bootstrap_connected()

    def close(self, timeout: float | None = None) -> None:
        """Flush and close; further ``send`` calls raise."""
        self._closed = True
        self._producer.close(timeout=timeout)

    def __enter__(self) -> PriorityProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PriorityProducer(max_priority={self._max_priority}, closed={self._closed})"


def create_priority_topics(
    bootstrap_servers: str | Sequence[str] | KafkaAdminClient,
    topic: str,
    max_priority: int,
    num_partitions: int = 1,
    replication_factor: int = 1,
    topic_configs: Mapping[str, str] | None = None,
    min_insync_replicas: int | None = None,
) -> list[str]:
    """Create the ``max_priority`` topics of a logical topic; those that exist are left alone.

    ``min_insync_replicas`` (at most ``replication_factor``) sets each topic's
    ``min.insync.replicas``: with ``acks="all"``, a write is refused rather than acknowledged
    by fewer replicas (3 and 2 is the usual production choice). It wins over the same key in
    ``topic_configs``; topics that already exist keep their configuration.

    Returns the priority topic names, highest level first. Idempotent: calling it again, or
    racing another process doing the same, is not an error.
    """
    _count("num_partitions", num_partitions, MAX_PARTITIONS)
    _count("replication_factor", replication_factor, MAX_REPLICATION_FACTOR)
    if min_insync_replicas is not None:
        _count("min_insync_replicas", min_insync_replicas, replication_factor)
    if topic_configs is not None and (
        not isinstance(topic_configs, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in topic_configs.items())
    ):
        raise ConfigError(
            f"'topic_configs' must be a Mapping of str to str (got {shown(topic_configs)})."
        )
    configs = dict(topic_configs or {})
    if min_insync_replicas is not None:
        configs["min.insync.replicas"] = str(min_insync_replicas)
    names = priority_topics(topic, max_priority)
    owns_admin = not isinstance(bootstrap_servers, KafkaAdminClient)
    if owns_admin and not (
        (isinstance(bootstrap_servers, str) and bootstrap_servers)
        or (
            isinstance(bootstrap_servers, Sequence)
            and bootstrap_servers
            and all(isinstance(s, str) and s for s in bootstrap_servers)
        )
    ):
        raise ConfigError(
            "'bootstrap_servers' must be 'host:port', a list of them or a KafkaAdminClient "
            f"(got {shown(bootstrap_servers)})."
        )
    admin: Any = (
        KafkaAdminClient(**with_client_defaults({"bootstrap_servers": bootstrap_servers}))
        if owns_admin else bootstrap_servers
    )
    try:
        existing = set(admin.list_topics())
        for name in (name for name in names if name not in existing):
            # Created meanwhile by someone else: idempotence is the contract.
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics([
                    NewTopic(name, num_partitions=num_partitions,
                             replication_factor=replication_factor,
                             topic_configs=configs)
                ], wait_for_metadata=True)
    finally:
        if owns_admin:
            admin.close()
    return names
