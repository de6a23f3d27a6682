"""The kafka-python PriorityProducer's documented path; the code lives in
:mod:`priority_kafka.kafka_python.producer`, the kafka-python family's folder."""

from priority_kafka.kafka_python.producer import PriorityProducer, create_priority_topics

__all__ = ["PriorityProducer", "create_priority_topics"]
