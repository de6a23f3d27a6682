"""priority_kafka: message priority and key-ordered parallelism for kafka-python consumers.

* :class:`PriorityConsumer` / :class:`PriorityProducer` — drop-in replacements for
  kafka-python's ``KafkaConsumer`` / ``KafkaProducer`` over one topic per priority level, with
  the capacity of each ``poll()`` split across levels (:class:`ExponentialDistributor` and
  friends) and lent to busy levels (:class:`CapacityBurst`).
* :class:`ShardedExecutor` — key-ordered parallel handling of a consumer's records on a shared
  worker pool, committing only what is done, with pause/resume back-pressure.
* The local Apache Kafka broker for tests lives in :mod:`priority_kafka.testing`; the PySpark
  data source in :mod:`priority_kafka.spark` (extra ``[spark]``).
"""

import importlib as _importlib
import typing as _typing

from priority_kafka.budgets import Budget, Budgets, Throttled
from priority_kafka.burst import CapacityBurst
from priority_kafka.config import ExecutorConfig, PriorityConfig
from priority_kafka.distributors import (
    Distributor,
    ExponentialDistributor,
    LinearDistributor,
    WeightedDistributor,
    distribute,
)
from priority_kafka.errors import (
    BrokerStartError,
    ConfigError,
    DeserializationError,
    HandlerError,
    IllegalStateError,
    MissingTopicsError,
    PriorityKafkaError,
    TransactionError,
)
from priority_kafka.naming import (
    check_levels,
    level_group_id,
    priority_topic,
    priority_topics,
    split_priority_topic,
)

if _typing.TYPE_CHECKING:
    from priority_kafka.executor import ExecutorStats, Output, ShardedExecutor
    from priority_kafka.kafka_python.consumer import ConsumerClosedError, PriorityConsumer
    from priority_kafka.kafka_python.producer import PriorityProducer, create_priority_topics

# The names whose modules import kafka-python (and threads) load on first use: importing any
# priority_kafka module runs this file, and kafka-python's import alone took 0.18 of this
# package's 0.25 s, paid again by every Spark Python worker that needs only the pure planning
# or the confluent reader.
_LAZY = {
    "ConsumerClosedError": "priority_kafka.kafka_python.consumer",
    "PriorityConsumer": "priority_kafka.kafka_python.consumer",
    "ExecutorStats": "priority_kafka.executor",
    "Output": "priority_kafka.executor",
    "ShardedExecutor": "priority_kafka.executor",
    "PriorityProducer": "priority_kafka.kafka_python.producer",
    "create_priority_topics": "priority_kafka.kafka_python.producer",
}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'priority_kafka' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

__all__ = [
    "BrokerStartError",
    "Budget",
    "Budgets",
    "CapacityBurst",
    "ConfigError",
    "ConsumerClosedError",
    "DeserializationError",
    "Distributor",
    "ExecutorConfig",
    "ExecutorStats",
    "ExponentialDistributor",
    "HandlerError",
    "IllegalStateError",
    "LinearDistributor",
    "MissingTopicsError",
    "Output",
    "PriorityConfig",
    "PriorityConsumer",
    "PriorityKafkaError",
    "PriorityProducer",
    "ShardedExecutor",
    "Throttled",
    "TransactionError",
    "WeightedDistributor",
    "check_levels",
    "create_priority_topics",
    "distribute",
    "level_group_id",
    "priority_topic",
    "priority_topics",
    "split_priority_topic",
]
