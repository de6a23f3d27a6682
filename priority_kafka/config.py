"""Configuration of the priority consumer: its own settings, and kafka-python's passed through.

Keys may be given as kafka-python names (``max_poll_records``) or as the Java-style dotted names
(``max.poll.records``) used by the Java client and the Flipkart original; both map to the same
setting. The caller's mapping is never modified.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from attrs import validators as v

from priority_kafka.distributors import Distributor, ExponentialDistributor, distribute
from priority_kafka.errors import ConfigError

__all__ = ["PriorityConfig", "normalize_keys", "split_configs"]

# kafka-python's default, so a drop-in replacement keeps the batch size callers tuned for.
DEFAULT_MAX_POLL_RECORDS = 500


def _positive_int(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"'{attribute.name}' must be an integer >= 1 (got {value!r}).")


def _threshold_within_window(
    instance: PriorityConfig, attribute: attrs.Attribute[int], value: int
) -> None:
    if value > instance.max_poll_history_window_size:
        raise ConfigError(
            f"'{attribute.name}' must be at most max_poll_history_window_size "
            f"({instance.max_poll_history_window_size}) (got {value!r})."
        )


def _callable_distributor(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not callable(value):
        raise ConfigError(
            f"'{attribute.name}' must be a callable (max_priority, max_poll_records) -> "
            f"{{level: quota}} (got {value!r})."
        )


@attrs.frozen
class PriorityConfig:
    """The settings PriorityConsumer adds to kafka-python's.

    Attributes:
        max_priority: number of priority levels N; topic ``t`` becomes ``t-0`` .. ``t-(N-1)``,
            0 being the lowest priority.
        max_poll_records: most records one ``poll()`` returns, summed over all levels.
        max_poll_history_window_size: W, how many past polls each level's window remembers.
        min_poll_window_maxout_threshold: T, how many maxed-out polls in the window make a
            level eligible to burst (1 <= T <= W).
        max_poll_records_distributor: splits ``max_poll_records`` into reserved per-level quotas.
    """

    max_priority: int = attrs.field(validator=_positive_int)
    max_poll_records: int = attrs.field(default=DEFAULT_MAX_POLL_RECORDS, validator=_positive_int)
    max_poll_history_window_size: int = attrs.field(default=6, validator=_positive_int)
    min_poll_window_maxout_threshold: int = attrs.field(
        default=4, validator=v.and_(_positive_int, _threshold_within_window)
    )
    max_poll_records_distributor: Distributor = attrs.field(
        factory=ExponentialDistributor, validator=_callable_distributor
    )

    def reserved_quotas(self) -> dict[int, int]:
        """The distributor's split of ``max_poll_records``, highest level first (validated)."""
        return distribute(
            self.max_poll_records_distributor, self.max_priority, self.max_poll_records
        )


_PRIORITY_KEYS = frozenset(field.name for field in attrs.fields(PriorityConfig))


def normalize_keys(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy with Java-style dotted keys turned into kafka-python names.

    ``{"max.poll.records": 50}`` becomes ``{"max_poll_records": 50}``. A key given in both
    spellings is ambiguous and rejected.
    """
    normalized: dict[str, Any] = {}
    for key, value in configs.items():
        if not isinstance(key, str):
            raise ConfigError(f"Configuration keys must be strings (got {key!r}).")
        name = key.replace(".", "_")
        if name in normalized:
            raise ConfigError(f"Configuration key {name!r} is given twice (as {key!r} too).")
        normalized[name] = value
    return normalized


def split_configs(configs: Mapping[str, Any]) -> tuple[PriorityConfig, dict[str, Any]]:
    """Separate PriorityConsumer's settings from the kafka-python consumer settings.

    The second result holds everything else, for kafka-python's ``KafkaConsumer`` (which
    rejects unknown keys itself, with its usual ``KafkaConfigurationError``).
    """
    normalized = normalize_keys(configs)
    own = {key: normalized.pop(key) for key in list(normalized) if key in _PRIORITY_KEYS}
    if own.get("max_priority") is None:
        raise ConfigError(
            "'max_priority' is required: the number of priority levels (topics <name>-0 .. "
            "<name>-<max_priority - 1>)."
        )
    config = PriorityConfig(**own)
    config.reserved_quotas()  # a distributor that cannot split fails here, not at the first poll
    return config, normalized
