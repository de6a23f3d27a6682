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

from priority_kafka.burst import CapacityBurst
from priority_kafka.config import PriorityConfig
from priority_kafka.consumer import ConsumerClosedError, PriorityConsumer
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
    PriorityKafkaError,
)
from priority_kafka.executor import ExecutorConfig, ExecutorStats, ShardedExecutor
from priority_kafka.naming import (
    level_group_id,
    priority_topic,
    priority_topics,
    split_priority_topic,
)
from priority_kafka.producer import PriorityProducer, create_priority_topics

__version__ = "0.1.0"

__all__ = [
    "BrokerStartError",
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
    "PriorityConfig",
    "PriorityConsumer",
    "PriorityKafkaError",
    "PriorityProducer",
    "ShardedExecutor",
    "WeightedDistributor",
    "create_priority_topics",
    "distribute",
    "level_group_id",
    "priority_topic",
    "priority_topics",
    "split_priority_topic",
]
