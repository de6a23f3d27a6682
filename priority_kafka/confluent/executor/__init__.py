"""ShardedExecutor on confluent-kafka: the documented path of the confluent family's adapter.

The code lives by role, as in every family's folder: :mod:`priority_kafka.confluent._client`
(``ConfluentClient``, which ``ShardedExecutor`` picks for a confluent consumer),
``_records`` (``Record``) and ``_dead_letters``.
"""

from priority_kafka.confluent._client import ConfluentClient
from priority_kafka.confluent._dead_letters import DeadLetterProducer, confluent_dead_letters
from priority_kafka.confluent._records import Record

__all__ = ["ConfluentClient", "DeadLetterProducer", "Record", "confluent_dead_letters"]
