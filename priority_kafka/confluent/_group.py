"""A level consumer's fatal group error, told clearly.

librdkafka reports a fatal error of a consumer once, as an error event (code ``_FATAL``, with
``fatal()`` false on the event itself), and from then on the consumer returns nothing: a loop
that skips error events, or an executor that logs them, would wait for ever. The case that
matters for the consumer group protocol (KIP-848) is static membership: a ``group.instance.id``
still held by a live member now fences the member that joins (the classic protocol fenced the
one already in the group).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from priority_kafka.confluent._commit_reads import unretried_commit_read
from priority_kafka.confluent._config import consumer_protocol

__all__ = ["check_events", "fatal_exception", "watches_fatal"]


def watches_fatal(config: Mapping[str, Any]) -> bool:
    """Whether a consumer of ``config`` can be fenced for good: it uses the consumer protocol
    or static membership. Only those pay for looking at every message's error."""
    return consumer_protocol(config) or bool(config.get("group.instance.id"))


def check_events(
    consumer: Any, messages: list[Message], config: Mapping[str, Any],
) -> KafkaException | None:
    """Replace the fatal error events in ``messages`` (several levels can be fenced in one
    call) by ones that say what they mean, and renew the levels of ``consumer`` whose commit
    read librdkafka will never retry (#5586: a static member rejoining a coordinator that has
    just come back; the event stays as it came). The first exception the next call must
    raise, if any."""
    first = None
    for index, message in enumerate(messages):
        error = message.error()
        if error is None:
            continue
        if error.fatal() or error.code() == KafkaError._FATAL:
            fatal = fatal_exception(error, config)
            messages[index] = Message(error=fatal.args[0])
            first = first or fatal
        else:
            renewed_or_stop = unretried_commit_read(consumer, error)  # renews, whatever came first
            first = first or renewed_or_stop
    return first


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
