"""as_client: the executor's client for a consumer of any family, through the registry.

A kafka-python consumer (``KafkaConsumer`` or :class:`~priority_kafka.PriorityConsumer`) gets
``KafkaClient``, which carries kafka-python's work-arounds; a confluent one (``Consumer`` or
``priority_kafka.confluent.PriorityConsumer``) gets ``ConfluentClient``. Which family a consumer
is of, :func:`priority_kafka.families.family_of` tells, importing a family only when its client
library is already loaded, so the executor never imports one family's client for the other's
consumer; an object that already has the client shape (an adapter, a test fake) is used as it
is.
"""

from __future__ import annotations

from typing import Any

from priority_kafka._types import ClientConsumer, check_client_consumer
from priority_kafka.config import DEFAULT_COMMIT_TIMEOUT_MS
from priority_kafka.families import family_of

__all__ = ["as_client"]


def as_client(
    consumer: Any, commit_timeout_ms: int = DEFAULT_COMMIT_TIMEOUT_MS
) -> ClientConsumer:
    """The executor's client for ``consumer``, its synchronous commits bounded by
    ``commit_timeout_ms``; TypeError naming what is missing otherwise."""
    family = family_of(consumer)
    if family is not None:
        client: ClientConsumer = family.load().client(consumer, commit_timeout_ms)
        return client
    check_client_consumer(consumer)
    return consumer
