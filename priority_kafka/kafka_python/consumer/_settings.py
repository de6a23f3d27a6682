"""A kafka-python PriorityConsumer's settings: what it keeps for itself, and each level's configs.

:meth:`ConsumerSettings.parse` splits the caller's settings once: the priority settings
(:class:`~priority_kafka.PriorityConfig`), the ones the facade applies itself instead of
kafka-python (auto-commit, deserializers, the iterator's timeout), the connection settings other
clients of the cluster need, and what every level's ``KafkaConsumer`` gets.
:meth:`ConsumerSettings.level_configs` derives one level's configs from those.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from kafka.errors import KafkaConfigurationError

from priority_kafka._checks import check_number
from priority_kafka._levels import LevelRouter
from priority_kafka._properties import kafka_python_kinds, typed_settings
from priority_kafka.config import (
    PRIORITY_KINDS,
    PriorityConfig,
    connection_configs,
    split_configs,
)
from priority_kafka.errors import ConfigError
from priority_kafka.families import KAFKA_PYTHON
from priority_kafka.kafka_python._kafka import KafkaConsumer, with_client_defaults
from priority_kafka.kafka_python.consumer._deserializing import Deserializers

__all__ = ["MAX_AUTO_COMMIT_MS", "ConsumerSettings", "UnknownSettingError"]


class UnknownSettingError(ConfigError, KafkaConfigurationError):
    """A setting neither PriorityConsumer nor kafka-python's ``KafkaConsumer`` has: the
    ``KafkaConfigurationError`` kafka-python raises for it, and a ConfigError (a ValueError)."""

    def __str__(self) -> str:  # the message alone, as a ConfigError's (KafkaError prefixes)
        return str(self.args[0]) if self.args else ""

#: Upper bound of ``auto_commit_interval_ms``: a longer interval is a mistake (turn
#: ``enable_auto_commit`` off instead), and an infinite one would silently never commit.
MAX_AUTO_COMMIT_MS = 3_600_000


@attrs.frozen(eq=False)
class ConsumerSettings:
    """The settings of one kafka-python PriorityConsumer, split and checked."""

    config: PriorityConfig
    router: LevelRouter
    #: The kafka-python settings every level's consumer gets (before its own ids and sizes);
    #: auto-commit off and the deserializers taken out, as the facade applies them itself.
    kafka: dict[str, Any]
    #: The iterator's ``consumer_timeout_ms`` (infinite unless given).
    iteration_timeout_ms: float
    #: Whether the facade auto-commits (``enable_auto_commit`` with a ``group_id``).
    auto_commit: bool
    auto_commit_interval_s: float
    session_timeout_ms: float
    deserializers: Deserializers
    bootstrap_servers: Any
    #: How another client reaches and authenticates to the cluster (``bootstrap_servers`` aside).
    connection: dict[str, Any]

    @classmethod
    def parse(cls, configs: Mapping[str, Any]) -> ConsumerSettings:
        """Split and check a PriorityConsumer's ``**configs`` (the caller's mapping is kept).

        A string value (from a ``.properties`` file or a command line) becomes the type of its
        setting; a key no setting has is refused before any client is created, naming the
        nearest setting.
        """
        kinds = {**kafka_python_kinds(KafkaConsumer), **PRIORITY_KINDS}
        configs = typed_settings(configs, kinds, (UnknownSettingError, "PriorityConsumer"))
        config, kafka_configs = split_configs(configs)
        iteration_timeout_ms = check_number(
            "consumer_timeout_ms",
            kafka_configs.get("consumer_timeout_ms", float("inf")),
            minimum=0,
            allow_inf=True,
        )
        # Auto-commit is done by the facade, not by kafka-python: its positions include records
        # fetched ahead into the prefetch buffers, which were not returned yet.
        auto_commit = bool(kafka_configs.get("enable_auto_commit", True)) and (
            kafka_configs.get("group_id") is not None
        )
        interval_ms = check_number(
            "auto_commit_interval_ms",
            kafka_configs.get("auto_commit_interval_ms", 5000),
            minimum=0,
            maximum=MAX_AUTO_COMMIT_MS,
        )
        kafka_configs["enable_auto_commit"] = False
        # Deserialized by the facade, not inside kafka-python (see
        # _kafka.DESERIALIZER_ERROR_STOPS_POLL).
        deserializers = Deserializers(
            kafka_configs.pop("key_deserializer", None),
            kafka_configs.pop("value_deserializer", None),
        )
        session_timeout_ms = check_number(
            "session_timeout_ms", kafka_configs.get("session_timeout_ms", 45_000), minimum=1
        )
        return cls(
            config=config,
            router=LevelRouter(config.max_priority),
            kafka=kafka_configs,
            iteration_timeout_ms=iteration_timeout_ms,
            auto_commit=auto_commit,
            auto_commit_interval_s=interval_ms / 1000,
            session_timeout_ms=session_timeout_ms,
            deserializers=deserializers,
            bootstrap_servers=kafka_configs.get("bootstrap_servers", "localhost"),
            connection=connection_configs(kafka_configs),
        )

    def level_configs(self, level: int) -> dict[str, Any]:
        """The ``KafkaConsumer`` configs of level ``level`` (a fresh dict)."""
        level_configs = self.router.level_config(
            with_client_defaults(self.kafka), level, KAFKA_PYTHON.key_style
        )
        # Each level's consumer may return up to the whole budget when it bursts.
        level_configs["max_poll_records"] = self.config.max_poll_records
        # A consumer only reads: a missing level topic is not created by subscribing to it.
        level_configs.setdefault("allow_auto_create_topics", False)
        if "max_partition_fetch_bytes" not in self.kafka:
            level_configs["max_partition_fetch_bytes"] = self._level_fetch_bytes(level_configs)
        return level_configs

    def fetch_budget(self) -> dict[str, Any]:
        """A level's share of ``fetch_buffer_bytes`` (``fetch_share``) and the most bytes per
        partition it may set (``fetch_ceiling``; None if the caller set
        ``max_partition_fetch_bytes``); see ``consumer._fetch``."""
        given = "max_partition_fetch_bytes" in self.kafka
        return {
            "fetch_share": self.config.fetch_buffer_bytes // self.config.max_priority,
            "fetch_ceiling": None if given else self._level_fetch_bytes(
                with_client_defaults(self.kafka)
            ),
        }

    def _level_fetch_bytes(self, level_configs: Mapping[str, Any]) -> int:
        """A level's ``max_partition_fetch_bytes`` unless given: kafka-python's default once per
        level, within ``fetch_max_bytes``.

        One consumer of every level's partitions would fetch up to that much of each in one
        request; a level's consumer fetches only its own, so N levels sent N times the
        requests for the same records. At kafka-python's 1 MiB, three levels read 0.95 of a raw
        consumer's records per CPU-second; at 3 MiB, 0.98 (benchmarks.consumer_overhead).
        """
        defaults = KafkaConsumer.DEFAULT_CONFIG
        per_level = defaults["max_partition_fetch_bytes"] * self.config.max_priority
        return min(per_level, level_configs.get("fetch_max_bytes", defaults["fetch_max_bytes"]))
