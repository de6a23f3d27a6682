"""The kafka-python family's edge: every module here may import kafka-python.

The same private names as :mod:`priority_kafka.confluent` for the same roles: ``_client``
(the executor's adapter, ``KafkaClient``), ``_dead_letters``, ``_records`` (fast record
decoding), ``_transactions``; ``_kafka`` holds kafka-python's imports and work-around flags
and ``_net`` its network client's. The public front ends are ``consumer`` and ``producer``,
re-exported at their documented paths ``priority_kafka.consumer`` / ``priority_kafka.producer``.

Importing this package loads nothing: the pure modules of ``consumer/`` stay importable
without kafka-python.
"""
