"""priority_kafka for asyncio: aiokafka's consumer and producer with priority levels.

:class:`PriorityConsumer` is a drop-in for ``aiokafka.AIOKafkaConsumer`` and
:class:`PriorityProducer` for ``aiokafka.AIOKafkaProducer`` (``pip install
'priority-kafka[aio]'``); see docs/asyncio.md.
"""

from priority_kafka.aio.consumer import PriorityConsumer
from priority_kafka.aio.producer import PriorityProducer

__all__ = ["PriorityConsumer", "PriorityProducer"]
