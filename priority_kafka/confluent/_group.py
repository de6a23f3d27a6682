"""A level consumer's fatal group error, told clearly.

librdkafka reports a fatal error of a consumer once, as an error event (code ``_FATAL``, with
``fatal()`` false on the event itself), and from then on the consumer returns nothing: a loop
that skips error events, or an executor that logs them, would wait for ever. The case that
matters for the consumer group protocol (KIP-848) is static membership: a ``group.instance.id``
still held by a live member now fences the member that joins (the classic protocol fenced the
one already in the group).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from priority_kafka.confluent._config import consumer_protocol

__all__ = ["error_events", "fatal_exception", "is_fatal", "watches_fatal"]


def watches_fatal(config: Mapping[str, Any]) -> bool:
    """Whether a consumer of ``config`` can be fenced for good: it uses the consumer protocol
    or static membership. Only those pay for looking at every message's error."""
    return consumer_protocol(config) or bool(config.get("group.instance.id"))


def error_events(messages: Sequence[Message]) -> list[tuple[int, KafkaError]]:
    """The error events in ``messages`` with their indexes (several levels can be fenced in
    one call)."""
    found = []
    for index, message in enumerate(messages):
        error = message.error()
        if error is not None:
            found.append((index, error))
    return found


def is_fatal(error: KafkaError) -> bool:
    """Whether ``error`` ends its consumer for good."""
    return error.fatal() or error.code() == KafkaError._FATAL


def fatal_exception(error: KafkaError, config: Mapping[str, Any]) -> KafkaException:
    """A fatal ``KafkaException`` for ``error`` saying what it means for a priority level."""
    reason = error.str()
    instance = config.get("group.instance.id")
    if instance and consumer_protocol(config):
        reason += (
            f" (the levels use 'group.instance.id' {instance!r} + '-<level>': with "
            f"'group.protocol': 'consumer' a member joining with an instance id that a live "
            f"member still holds is fenced, not the older member; stop the other member or "
            f"give this one another 'group.instance.id')"
        )
    reason = f"a level consumer failed for good and can no longer consume: {reason}"
    return KafkaException(KafkaError(KafkaError._FATAL, reason, fatal=True))
