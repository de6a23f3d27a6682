"""Configuration of the priority consumer: its own settings, and kafka-python's passed through.

Keys may be given as kafka-python names (``max_poll_records``) or as the Java-style dotted names
(``max.poll.records``) used by the Java client and the Flipkart original; both map to the same
setting. The caller's mapping is never modified.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

import attrs
from attrs import validators as v

from priority_kafka._checks import MAX_PRIORITY, MAX_WINDOW, check_int, shown
from priority_kafka._properties import Kind, attrs_kinds
from priority_kafka.distributors import (
    Distributor,
    ExponentialDistributor,
    check_distributor,
    distribute,
    parse_distributor,
)
from priority_kafka.errors import ConfigError
from priority_kafka.sharding import Ordering, check_ordering

__all__ = ["ExecutorConfig", "FailurePolicy", "PriorityConfig", "normalize_keys", "split_configs"]

# kafka-python's default, so a drop-in replacement keeps the batch size callers tuned for.
DEFAULT_MAX_POLL_RECORDS = 500

# Java's default.api.timeout.ms: how long a blocking client call may take by default.
DEFAULT_COMMIT_TIMEOUT_MS = 60_000
#: How long an exactly-once executor's start retries ``init_transactions`` failing with a
#: retriable error (a transaction coordinator's node down or cut off): a producer that
#: cannot start stops the executor.
INIT_TRANSACTIONS_RETRY_S = 300
#: How long the executor's polling thread may wait for the commits of newly assigned
#: partitions (every level stops while it waits; past it, their records are read from the
#: committed offset without the offset map's finished records skipped).
COMMITTED_TIMEOUT_MS = 30_000
#: Most records one poll() may return: they are all in memory at once.
MAX_POLL_RECORDS = 1_000_000
_MAX_BYTES = 1 << 40  # one TiB: any byte budget beyond is a mistake
#: Default of PriorityConfig.fetch_buffer_bytes: what the levels' clients fetch ahead, together
#: (docs/executor.md, "Memory").
DEFAULT_FETCH_BUFFER_BYTES = 8 << 20


def _int_in(minimum: int, maximum: int) -> Callable[[Any, attrs.Attribute[Any], object], None]:
    def validate(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
        check_int(attribute.name, value, minimum=minimum, maximum=maximum)

    return validate


def _boolean(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"'{attribute.name}' must be True or False (got {shown(value)}).")


def _threshold_within_window(
    instance: PriorityConfig, attribute: attrs.Attribute[int], value: int
) -> None:
    if value > instance.max_poll_history_window_size:
        raise ConfigError(
            f"'{attribute.name}' must be at most max_poll_history_window_size "
            f"({instance.max_poll_history_window_size}) (got {shown(value)})."
        )


def _callable_distributor(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_distributor(attribute.name, value)


@attrs.frozen
class PriorityConfig:
    """The settings PriorityConsumer adds to kafka-python's.

    Attributes:
        max_priority: number of priority levels N, 1 to 1000; topic ``t`` becomes ``t-0`` ..
            ``t-(N-1)``, 0 being the lowest priority.
        max_poll_records: most records one ``poll()`` returns, summed over all levels
            (1 to 1,000,000).
        max_poll_history_window_size: W, how many past polls each level's window remembers
            (1 to 100,000).
        min_poll_window_maxout_threshold: T, how many maxed-out polls in the window make a
            level eligible to burst (1 <= T <= W).
        max_poll_records_distributor: splits ``max_poll_records`` into reserved per-level quotas.
        fetch_buffer_bytes: about how many bytes of records the levels' clients fetch ahead
            of ``poll()``, all levels together (1 MiB to 1 TiB; default 8 MiB), split evenly
            over the levels. kafka-python: a level's share over the partitions assigned to it
            is each partition's ``max_partition_fetch_bytes`` (at most 1 MiB per level), unless
            that is given. confluent-kafka: a level's share is its
            ``queued.max.messages.kbytes`` and its ``fetch.max.bytes`` (at least
            ``message.max.bytes``), each unless given. aiokafka: a level's share is its
            ``fetch_max_bytes``, and each partition's ``max_partition_fetch_bytes`` is 1 MiB
            per level within it, each unless given.
        wait_for_topics: let ``subscribe()`` go on when level topics of the topics
            subscribed to do not exist yet (a warning names them; the levels read them once
            they are created) instead of raising MissingTopicsError (default False). A level
            above ``max_priority`` that exists raises either way.
    """

    max_priority: int = attrs.field(validator=_int_in(1, MAX_PRIORITY))
    max_poll_records: int = attrs.field(
        default=DEFAULT_MAX_POLL_RECORDS, validator=_int_in(1, MAX_POLL_RECORDS)
    )
    max_poll_history_window_size: int = attrs.field(
        default=6, validator=_int_in(1, MAX_WINDOW)
    )
    min_poll_window_maxout_threshold: int = attrs.field(
        default=4, validator=v.and_(_int_in(1, MAX_WINDOW), _threshold_within_window)
    )
    max_poll_records_distributor: Distributor = attrs.field(
        factory=ExponentialDistributor, validator=_callable_distributor
    )
    fetch_buffer_bytes: int = attrs.field(
        default=DEFAULT_FETCH_BUFFER_BYTES, validator=_int_in(1 << 20, _MAX_BYTES)
    )
    wait_for_topics: bool = attrs.field(default=False, validator=_boolean)

    def reserved_quotas(self) -> dict[int, int]:
        """The distributor's split of ``max_poll_records``, highest level first (validated)."""
        return distribute(
            self.max_poll_records_distributor, self.max_priority, self.max_poll_records
        )


_PRIORITY_KEYS = frozenset(field.name for field in attrs.fields(PriorityConfig))

#: How each PriorityConfig setting given as text (a .properties file, a command line)
#: converts: by its annotation, and the distributor by name or weights (``linear``, ``1,2,5``).
PRIORITY_KINDS: Mapping[str, Kind] = {
    **attrs_kinds(PriorityConfig),
    "max_poll_records_distributor": parse_distributor,
}


def normalize_keys(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy with Java-style dotted keys turned into kafka-python names.

    ``{"max.poll.records": 50}`` becomes ``{"max_poll_records": 50}``. A key given in both
    spellings is ambiguous and rejected.
    """
    normalized: dict[str, Any] = {}
    for key, value in configs.items():
        if not isinstance(key, str):
            raise ConfigError(f"Configuration keys must be strings (got {shown(key)}).")
        name = key.replace(".", "_")
        if name in normalized:
            raise ConfigError(f"Configuration key {name!r} is given twice (as {shown(key)} too).")
        normalized[name] = value
    return normalized


#: kafka-python settings this library's consumers and producers use unless told otherwise.
#: kafka-python backs off reconnecting up to 30 s, so after a broker restart of ~10 s a client
#: waited 6-12 s more before it tried again; at 1 s it is back within about a second of the
#: broker (docs/consumer.md, "Broker restarts"). One reconnect attempt per second per broker
#: while it is down costs nothing worth saving.
CLIENT_DEFAULTS: Mapping[str, Any] = {"reconnect_backoff_max_ms": 1000}


_CONNECTION_KEYS = frozenset({
    "bootstrap_servers", "security_protocol", "api_version", "client_dns_lookup",
    "socks5_proxy", "reconnect_backoff_ms", "reconnect_backoff_max_ms",
})


def connection_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """The kafka-python settings among ``configs`` (normalized keys) that say how to reach and
    authenticate to the cluster (``bootstrap_servers``, ``security_protocol``, ``ssl_*``,
    ``sasl_*``, ...): what another client of the same cluster needs."""
    return {
        key: value for key, value in configs.items()
        if key in _CONNECTION_KEYS or key.startswith(("ssl_", "sasl_"))
    }


def split_configs(configs: Mapping[str, Any]) -> tuple[PriorityConfig, dict[str, Any]]:
    """Separate PriorityConsumer's settings from the kafka-python consumer settings.

    The second result holds everything else, for kafka-python's ``KafkaConsumer`` (which
    rejects unknown keys itself, with its usual ``KafkaConfigurationError``).
    """
    normalized = normalize_keys(configs)
    own = {key: normalized.pop(key) for key in list(normalized) if key in _PRIORITY_KEYS}
    if own.get("max_priority") is None:
        raise ConfigError(
            "'max_priority' is required unless topics are given to the constructor (then it "
            "is the number of levels they have on the broker): the number of priority levels "
            "(topics <name>-0 .. <name>-<max_priority - 1>)."
        )
    config = PriorityConfig(**own)
    config.reserved_quotas()  # a distributor that cannot split fails here, not at the first poll
    return config, normalized


FailurePolicy: TypeAlias = Literal["dead_letter", "callback", "stop"]
FAILURE_POLICIES: tuple[FailurePolicy, ...] = ("dead_letter", "callback", "stop")


def _one_of(choices: tuple[str, ...]) -> Callable[[object, attrs.Attribute[Any], object], None]:
    def validate(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, str) or value not in choices:
            raise ConfigError(
                f"{attribute.name!r} must be one of {', '.join(choices)} (got {shown(value)})."
            )

    return validate


# Upper bounds that keep every setting meaningful (a longer wait is a mistake, not a choice)
# and every computation with it finite.
_MAX_MS = 3_600_000  # one hour
_MAX_SHARDS = 1024  # threads in one process
_MAX_COUNT = 1_000_000
_MAX_METADATA_BYTES = 1 << 20  # priority_kafka.offset_map.MAX_METADATA_BYTES
#: Default of ExecutorConfig.max_in_flight_bytes (docs/executor.md, "Memory").
DEFAULT_MAX_IN_FLIGHT_BYTES = 32 << 20


def _topic_name(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (
        not isinstance(value, str) or not value or len(value) > 249
        or not all(c.isascii() and (c.isalnum() or c in "._-") for c in value)
    ):
        raise ConfigError(
            f"{attribute.name!r} must be a Kafka topic name (1-249 of a-z A-Z 0-9 . _ -) "
            f"(got {shown(value)})."
        )


@attrs.frozen(kw_only=True)
class ExecutorConfig:
    """Settings of a :class:`~priority_kafka.ShardedExecutor` (all validated; times in ms).

    Times are at most one hour, counts at most 1,000,000.

    Attributes:
        shards: worker threads in the shared pool, 1 to 1024 (records of different lanes run
            in parallel on up to this many threads).
        ordering: ``"key"``, ``"partition"`` or ``"unordered"``; see :mod:`priority_kafka.sharding`.
        commit_interval_ms: commit the watermark at most this often (0: after every poll).
        commit_timeout_ms: the longest an offset commit, or closing the consumer, may block
            the polling thread (default 60,000, Java's ``default.api.timeout.ms``). A commit
            not done by then counts as failed (a warning, ``stats().commit_failures``) and a
            later one covers its offsets. On confluent-kafka it leaves the consumer blocked
            (one call at a time per consumer): a confluent ``PriorityConsumer``'s level then
            gets a new consumer (its partitions lost, the executor goes on); over a plain
            ``Consumer`` the executor stops, ``run()`` raising ``KafkaException`` (see
            docs/reliability.md). Exactly-once on confluent-kafka: also the longest one call
            of the transactional producer may block; one still blocked fails its transaction,
            and a factory's new producer takes over (given a producer, the executor stops).
        max_in_flight_per_partition: pause a partition once this many of its records are
            received since its commit watermark (the lowest record not done): what a crash
            would replay. One stuck record thus pauses its partition after this many more.
        resume_in_flight_per_partition: resume it once at most this many are left
            (default: half of the maximum).
        max_in_flight_bytes: the bytes (keys and values as stored) of the records received
            since their partitions' commit watermarks, over all partitions, 1 KiB to 1 TiB
            (default 32 MiB): a partition is paused once its records pass its share (this
            divided by the partitions holding records) and resumed once at most half its
            share is left (and its record count allows). Records bound the count, this
            bounds their size.
        max_attempts: handler calls per record before the failure policy applies (1 = no retry).
        retry_backoff_ms / retry_backoff_max_ms: delay before the first retry, doubling per
            retry up to the maximum.
        failure_policy: ``"stop"`` (default; the executor stops and
            :meth:`~priority_kafka.ShardedExecutor.run` raises HandlerError),
            ``"dead_letter"`` (send to ``dead_letter_topic``) or ``"callback"`` (call
            ``on_failure``).
        dead_letter_topic: where ``"dead_letter"`` sends records.
        drain_timeout_ms: on stop, how long running handlers may take to finish.
        revoke_timeout_ms: on revoke, how long running handlers of the revoked partitions may
            take; keep it well below ``session_timeout_ms`` (heartbeats wait meanwhile).
        poll_timeout_ms: longest wait in one ``poll()`` when nothing is paused (while a
            partition is paused, at most 10 ms and no longer than the workers need for what
            is queued, then, if nothing came, until their next batch is done; at least 500 ms
            while the group joins).
        async_concurrency: for ``async def`` handlers, most coroutines running at once
            (default: ``shards``).
        stuck_warning_ms: a record whose handler runs longer than this is logged (once, as a
            warning naming it) and counted in ``stats().stuck_warnings``: its partition's commit
            waits for it, and the partition pauses once ``max_in_flight_per_partition`` records
            are received after it.
        offset_map: carry the offsets completed above each partition's committed watermark
            in the commit's metadata, and skip the records a partition's last commit says are
            done when the partition is taken on (after a restart or a rebalance), so finished
            records are not handled again (default on; see docs/executor.md).
        offset_metadata_max_bytes: the most metadata one partition's commit carries: the
            broker's ``offset.metadata.max.bytes`` (4096 by default), which refuses longer
            metadata; a map that does not fit carries its lowest offsets.
    """

    shards: int = attrs.field(default=16, validator=_int_in(1, _MAX_SHARDS))
    ordering: Ordering = attrs.field(default="key", converter=check_ordering)
    commit_interval_ms: int = attrs.field(default=1000, validator=_int_in(0, _MAX_MS))
    commit_timeout_ms: int = attrs.field(
        default=DEFAULT_COMMIT_TIMEOUT_MS, validator=_int_in(1, _MAX_MS)
    )
    max_in_flight_per_partition: int = attrs.field(
        default=1000, validator=_int_in(1, _MAX_COUNT)
    )
    resume_in_flight_per_partition: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_int_in(0, _MAX_COUNT))
    )
    max_in_flight_bytes: int = attrs.field(
        default=DEFAULT_MAX_IN_FLIGHT_BYTES, validator=_int_in(1024, _MAX_BYTES)
    )
    max_attempts: int = attrs.field(default=3, validator=_int_in(1, _MAX_COUNT))
    retry_backoff_ms: int = attrs.field(default=100, validator=_int_in(0, _MAX_MS))
    retry_backoff_max_ms: int = attrs.field(default=5000, validator=_int_in(0, _MAX_MS))
    failure_policy: FailurePolicy = attrs.field(
        default="stop", validator=_one_of(FAILURE_POLICIES)
    )
    dead_letter_topic: str | None = attrs.field(default=None, validator=_topic_name)
    drain_timeout_ms: int = attrs.field(default=30000, validator=_int_in(0, _MAX_MS))
    revoke_timeout_ms: int = attrs.field(default=3000, validator=_int_in(0, _MAX_MS))
    poll_timeout_ms: int = attrs.field(default=100, validator=_int_in(0, _MAX_MS))
    async_concurrency: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_int_in(1, _MAX_COUNT))
    )
    stuck_warning_ms: int = attrs.field(default=60_000, validator=_int_in(1, _MAX_MS))
    offset_map: bool = attrs.field(default=True, validator=_boolean)
    offset_metadata_max_bytes: int = attrs.field(
        default=4096, validator=_int_in(0, _MAX_METADATA_BYTES)
    )

    def __attrs_post_init__(self) -> None:
        resume = self.resume_in_flight_per_partition
        if resume is not None and resume >= self.max_in_flight_per_partition:
            raise ConfigError(
                "'resume_in_flight_per_partition' must be below 'max_in_flight_per_partition' "
                f"({self.max_in_flight_per_partition}) (got {resume})."
            )
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ConfigError(
                f"'retry_backoff_max_ms' must be at least 'retry_backoff_ms' "
                f"({self.retry_backoff_ms}) (got {self.retry_backoff_max_ms})."
            )
        if self.failure_policy == "dead_letter" and not self.dead_letter_topic:
            raise ConfigError(
                "'dead_letter_topic' must be a topic name when failure_policy is 'dead_letter' "
                f"(got {self.dead_letter_topic!r})."
            )

    @property
    def resume_threshold(self) -> int:
        """In-flight count at or below which a paused partition resumes."""
        if self.resume_in_flight_per_partition is not None:
            return self.resume_in_flight_per_partition
        return self.max_in_flight_per_partition // 2
