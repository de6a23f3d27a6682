"""The kafka-python PriorityConsumer's documented path; the code lives in
:mod:`priority_kafka.kafka_python.consumer`, the kafka-python family's folder."""

from priority_kafka.kafka_python.consumer import (
    ConsumerClosedError,
    ConsumerFactory,
    PollTiming,
    PriorityConsumer,
)

__all__ = ["ConsumerClosedError", "ConsumerFactory", "PollTiming", "PriorityConsumer"]
