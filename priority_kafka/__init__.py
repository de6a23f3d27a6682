"""priority_kafka: message priority and key-ordered parallelism for kafka-python consumers."""

from priority_kafka.errors import BrokerStartError, ConfigError, IllegalStateError, PriorityKafkaError

__all__ = [
    "BrokerStartError",
    "ConfigError",
    "IllegalStateError",
    "PriorityKafkaError",
]
