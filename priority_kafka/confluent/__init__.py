"""Priority topics on confluent-kafka (librdkafka): extra ``[confluent]``.

:class:`PriorityConsumer` and :class:`PriorityProducer` are drop-ins for
``confluent_kafka.Consumer`` and ``Producer`` over priority topics, configured with librdkafka's
property names plus ``max.priority`` and the other priority settings (docs/confluent.md).
:class:`~priority_kafka.ShardedExecutor` runs on them as it is (its adapter,
``_client.ConfluentClient``, is picked through :mod:`priority_kafka.families`).
:class:`PriorityShareConsumer` (experimental) reads priority topics through share groups
(KIP-932; confluent-kafka 2.15 or newer, loaded on first use; docs/share-groups.md), and
:class:`ShareExecutor` runs a handler over it on a pool of workers.
``import priority_kafka`` never imports confluent-kafka; this package does.
"""

from typing import Any

from priority_kafka.confluent._config import InvalidArgError
from priority_kafka.confluent.consumer import PriorityConsumer
from priority_kafka.confluent.producer import PriorityProducer

__all__ = [
    "InvalidArgError",
    "PriorityConsumer",
    "PriorityProducer",
    "PriorityShareConsumer",
    "ShareExecutor",
    "ShareExecutorConfig",
    "ShareExecutorStats",
    "ShareLevelStats",
    "ShareRecord",
]

# Loaded on first use: confluent-kafka's ShareConsumer exists only from 2.15, and the rest of
# this package works with older releases.
_SHARE_NAMES = {
    "PriorityShareConsumer": "priority_kafka.confluent.share",
    "ShareExecutor": "priority_kafka.confluent.share_executor",
    "ShareRecord": "priority_kafka.confluent.share_executor",
    "ShareExecutorConfig": "priority_kafka.confluent._share_config",
    "ShareExecutorStats": "priority_kafka.confluent._share_config",
    "ShareLevelStats": "priority_kafka.confluent._share_config",
}


def __getattr__(name: str) -> Any:
    module = _SHARE_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
