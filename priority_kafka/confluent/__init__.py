"""Priority topics on confluent-kafka (librdkafka): extra ``[confluent]``.

:class:`PriorityConsumer` and :class:`PriorityProducer` are drop-ins for
``confluent_kafka.Consumer`` and ``Producer`` over priority topics, configured with librdkafka's
property names plus ``max.priority`` and the other priority settings (docs/confluent.md).
:mod:`priority_kafka.confluent.executor` lets :class:`~priority_kafka.ShardedExecutor` run on
them. ``import priority_kafka`` never imports confluent-kafka; this package does.
"""

from priority_kafka.confluent._config import InvalidArgError
from priority_kafka.confluent.consumer import PriorityConsumer
from priority_kafka.confluent.producer import PriorityProducer

__all__ = ["InvalidArgError", "PriorityConsumer", "PriorityProducer"]
