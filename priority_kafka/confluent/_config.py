"""Config dicts with librdkafka's property names plus priority_kafka's, and the error they raise."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from confluent_kafka import KafkaError, KafkaException, cimpl

from priority_kafka._properties import nearest, typed
from priority_kafka.config import PRIORITY_KINDS, PriorityConfig
from priority_kafka.errors import ConfigError
from priority_kafka.naming import priority_topic

__all__ = [
    "InvalidArgError",
    "check_group_protocol",
    "connection_config",
    "consumer_protocol",
    "cooperative",
    "invalid_arg",
    "level_prefetch",
    "level_topic",
    "librdkafka_properties",
    "merge",
    "named_property",
    "pop_own",
    "split_config",
]

# Our keys by their dotted name (librdkafka's style), and the PriorityConfig field of each.
_OWN_KEYS = {field.name.replace("_", "."): field.name for field in attrs.fields(PriorityConfig)}

# The librdkafka properties another client of the same cluster needs (connection_config).
_CONNECTION_KEYS = frozenset({
    "bootstrap.servers", "metadata.broker.list", "security.protocol", "client.dns.lookup",
    "broker.address.family", "oauth_cb",
})
_CONNECTION_PREFIXES = ("ssl.", "sasl.", "enable.ssl.", "enable.sasl.", "ssl_")

# librdkafka refuses these beside group.protocol=consumer (KIP-848: the broker runs the
# membership and the assignment), each with what takes its place.
_BROKER_OWNED = {
    "session.timeout.ms": "the group config 'consumer.session.timeout.ms' (broker default "
                          "'group.consumer.session.timeout.ms')",
    "heartbeat.interval.ms": "the group config 'consumer.heartbeat.interval.ms' (broker default "
                             "'group.consumer.heartbeat.interval.ms')",
    "partition.assignment.strategy": "'group.remote.assignor' (an assignor the broker runs)",
    "group.protocol.type": "nothing: the consumer protocol has one type",
}


class InvalidArgError(ConfigError, KafkaException):
    """A bad priority setting or argument: confluent's ``KafkaException`` with an ``_INVALID_ARG``
    ``KafkaError`` in ``args[0]``, as librdkafka reports a bad property, and also a
    :class:`priority_kafka.ConfigError` (so a ``ValueError``)."""

    def __init__(self, message: str) -> None:
        super().__init__(KafkaError(KafkaError._INVALID_ARG, message))


@contextlib.contextmanager
def invalid_arg() -> Iterator[None]:
    """Re-raise priority_kafka's ConfigError as :class:`InvalidArgError`, with dotted key names."""
    try:
        yield
    except InvalidArgError:
        raise
    except ConfigError as exc:
        message = str(exc)
        for dotted, name in _OWN_KEYS.items():
            message = message.replace(f"'{name}'", f"'{dotted}'")
        raise InvalidArgError(message) from exc


def merge(config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """One dict from confluent's ``Consumer(config, **kwargs)`` calling forms (kwargs win)."""
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"expected configuration dict (got {config!r})")
    return {**(config or {}), **kwargs}


def pop_own(config: dict[str, Any], dotted: str) -> Any:
    """Remove and return our key ``dotted`` (also accepted with underscores); None if absent."""
    underscored = dotted.replace(".", "_")
    if dotted in config and underscored in config:
        raise InvalidArgError(f"Configuration property {dotted!r} is given twice (also as "
                              f"{underscored!r}).")
    return config.pop(dotted, config.pop(underscored, None))


def split_config(config: Mapping[str, Any]) -> tuple[PriorityConfig, dict[str, Any]]:
    """Separate our settings (``max.priority`` ...) from librdkafka's; check ours.

    librdkafka checks the rest itself when the client is created (an unknown property is a
    ``KafkaException``, as with ``confluent_kafka.Consumer``).
    """
    rest = dict(config)
    own = {name: pop_own(rest, dotted) for dotted, name in _OWN_KEYS.items()}
    if own["max_priority"] is None:
        raise InvalidArgError(
            "'max.priority' is required: the number of priority levels (topics <name>-0 .. "
            "<name>-<max.priority - 1>)."
        )
    with invalid_arg():
        # A string (a .properties file, a command line) is a value, as librdkafka's are.
        own = {name: typed(name, value, PRIORITY_KINDS[name])
               for name, value in own.items() if value is not None}
        priority_config = PriorityConfig(**own)
        priority_config.reserved_quotas()  # a distributor that cannot split fails here
    return priority_config, rest


@functools.cache
def librdkafka_properties() -> tuple[str, ...]:
    """Every property name the loaded librdkafka documents (its own table of them, as
    ``rd_kafka_conf_properties_show`` prints it); empty where that cannot be read."""
    try:
        library = ctypes.CDLL(cimpl.__file__)  # its symbols include librdkafka's
        libc = ctypes.CDLL(None)
        libc.fdopen.restype = ctypes.c_void_p
        libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        library.rd_kafka_conf_properties_show.argtypes = [ctypes.c_void_p]
        with tempfile.TemporaryFile() as table:
            stream = libc.fdopen(os.dup(table.fileno()), b"w")
            if not stream:
                return ()
            library.rd_kafka_conf_properties_show(stream)
            libc.fclose(stream)
            table.seek(0)
            text = table.read().decode("utf-8", "replace")
    except (OSError, AttributeError):
        return ()
    return tuple(dict.fromkeys(re.findall(r"^([a-z][a-z0-9._]+)\s+\|", text, re.M)))


@contextlib.contextmanager
def named_property() -> Iterator[None]:
    """librdkafka's "No such configuration property" for a client created in the block,
    re-raised as :class:`InvalidArgError` naming the property as given and the nearest one."""
    try:
        yield
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        found = re.match(r'No such configuration property: "(.*)"', error.str()) if (
            isinstance(error, KafkaError) and error.code() == KafkaError._INVALID_ARG) else None
        if found is None:
            raise
        valid = (*librdkafka_properties(), *_OWN_KEYS)
        raise InvalidArgError(f"No such configuration property: {found[1]!r}"
                              f"{nearest(found[1], valid, respell=False)}") from exc


def connection_config(librdkafka: Mapping[str, Any]) -> dict[str, Any]:
    """The properties of ``librdkafka`` that say how to reach and authenticate to the cluster
    (``bootstrap.servers``, ``security.protocol``, ``ssl.*``, ``sasl.*``, ...): what another
    client of the same cluster needs (a dead-letter producer, an admin client)."""
    return {
        key: value for key, value in librdkafka.items()
        if key in _CONNECTION_KEYS or key.startswith(_CONNECTION_PREFIXES)
    }


def consumer_protocol(config: Mapping[str, Any]) -> bool:
    """Whether ``config`` joins its group with the consumer protocol (KIP-848): librdkafka
    reads ``group.protocol`` case-insensitively, ``classic`` by default."""
    protocol = config.get("group.protocol")
    return isinstance(protocol, str) and protocol.lower() == "consumer"


def check_group_protocol(config: Mapping[str, Any]) -> None:
    """Refuse, naming it, a property librdkafka refuses beside ``group.protocol=consumer``.

    librdkafka would refuse it too, but only as each level's ``Consumer`` is created and
    without saying what replaces it; this check runs before any level exists.
    """
    if not consumer_protocol(config):
        return
    for key, instead in _BROKER_OWNED.items():
        if key in config:
            raise InvalidArgError(
                f"{key!r} cannot be set with 'group.protocol': 'consumer' (KIP-848; got "
                f"{key!r}: {config[key]!r}): the broker owns it there, use {instead}; or "
                f"remove 'group.protocol' to keep the classic protocol."
            )


def cooperative(config: Mapping[str, Any]) -> bool:
    """Whether assignments change with ``incremental_assign()`` under ``config``: KIP-429's
    cooperative assignor, or KIP-848's consumer protocol."""
    return "cooperative" in str(
        config.get("partition.assignment.strategy", "")
    ) or consumer_protocol(config)


def level_topic(topic: str, level: int) -> str:
    """Level ``level``'s topic for a logical topic, or for a ``^regex`` over logical names."""
    if isinstance(topic, str) and topic.startswith("^"):
        return f"^({topic[1:]})-{level}$"
    return priority_topic(topic, level)


def level_prefetch(levels: int, budget: int, message_max: int = 1_000_000) -> dict[str, int]:
    """librdkafka's prefetch defaults for one level of ``levels``, whose prefetches hold about
    ``budget`` bytes together (``fetch.buffer.bytes``, 8 MiB by default): each level's share is
    its queue (``queued.max.messages.kbytes``) and the most one fetch response brings
    (``fetch.max.bytes``, 50 MiB in librdkafka; at least ``message_max``, which librdkafka
    requires). The levels shared 64 MiB of queue before, and under an executor the process
    reached 236 MB of RSS over a backlog (``benchmarks.executor_memory``).

    librdkafka sizes its prefetch for one consumer reading everything: up to 100,000 messages
    per partition (``queued.min.messages``) and 64 MiB (``queued.max.messages.kbytes``), and
    once past either it waits ``fetch.queue.backoff.ms`` (1 s) before fetching again. Levels are
    read unevenly by design, so a level read at a seventh of the rate held its whole prefetch
    for long: N instances with full prefetches touched twice a raw Consumer's memory (page
    faults: 27k against 13k reading 300k messages; benchmarks/consumer_overhead.py
    --client confluent, then named confluent_consumer.py). Half the messages (50,000) and a
    share of the bytes, so the levels together prefetch what one Consumer does, kept the CPU
    below a raw Consumer's; 20,000 cost wall time (0.87 of a raw Consumer's records/s against
    0.96, per round medians of one interleaved run). The short back-off lets a level that
    drained its smaller prefetch fetch again at once: with the bounded queue, 10 ms read 1M
    records at 0.81 of the rate of the unbounded 64 MiB (``1f0e812``), 2 ms at 1.03 (5 rounds
    each, ``benchmarks.consumer_overhead --client confluent --records 1000000``), the executor's
    backlog RSS 149-154 MB with 10 ms, 157 MB with 2 ms (``benchmarks.executor_memory``).
    """
    share = budget // levels
    return {  # within librdkafka's ranges (2 GiB of queue, 2 GiB - 513 B of fetch)
        "queued.min.messages": 50_000,
        "queued.max.messages.kbytes": min(2_097_151, max(1024, share // 1024)),
        "fetch.max.bytes": min(2_147_483_135, max(message_max, share)),
        "fetch.queue.backoff.ms": 2,
    }
