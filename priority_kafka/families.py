"""The client families, named once: the only place that tells kafka-python, confluent and
aiokafka apart.

A :class:`Family` says what the rest of the package needs to know without loading the family:
its name (the CLI's ``--client``, the Spark source's ``client`` option), how its settings are
spelled (kafka-python's ``group_id`` or librdkafka's ``group.id``), its client library and the
pip extra that installs it, and the module path of its folder's ``_family`` module, imported on
first use (as kafka-python's ``register_backend_lazy``), so a confluent process never imports
kafka-python and ``import priority_kafka`` imports neither.

Each ``_family`` module (``priority_kafka/kafka_python/_family.py``,
``priority_kafka/confluent/_family.py``) has the same functions: ``owns(consumer)``,
``client(consumer, commit_timeout_ms)`` (the executor's adapter), ``check_consumer_settings``
and ``executor_consumer`` (the consumer the CLI's ``consume`` runs an executor over); a family
the Spark source reads with also has ``_spark`` beside it (:meth:`Family.spark`). The one
translation of settings between the two spellings is :func:`to_librdkafka` /
:func:`to_kafka_python`. Adding a family: docs/architecture.md.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

import attrs

from priority_kafka.errors import ConfigError

if TYPE_CHECKING:  # the registry imports nothing of the package but its errors
    from priority_kafka._levels import KeyStyle

__all__ = [
    "AIOKAFKA", "CAPABILITIES", "CONFLUENT", "DEFAULT", "FAMILIES", "KAFKA_PYTHON", "NAMES",
    "Family", "family", "family_of", "having", "preferred_installed", "to_kafka_python",
    "to_librdkafka",
]


@attrs.frozen
class Family:
    """One client family: what is known of it without importing its client library."""

    #: As ``--client`` and the Spark source's ``client`` option spell it.
    name: str
    #: How its settings are spelled.
    key_style: KeyStyle
    #: The client library's top-level module.
    library: str
    #: Its folder's ``_family`` module, imported on first use.
    module: str
    #: The library's distribution, as pip names it.
    distribution: str
    #: The pip extra that installs the library (None: a dependency of priority-kafka).
    extra: str | None = None
    # What the family can do, for the callers that choose by it rather than by its name (the
    # tests and benchmarks that run only where a feature exists, and those driving a client
    # library directly). docs/asyncio.md, "Not on this family yet", says why aiokafka lacks
    # the ones it lacks.
    #: Its client library is librdkafka's (confluent_kafka): settings in one dict of dotted
    #: properties, ``poll()`` returns one message and ``consume(n, timeout)`` a list, errors
    #: come as messages and events, ``produce()`` reports through ``on_delivery``. False: the
    #: kafka-python calls (keywords, ``poll()`` returns records by partition, ``send()`` a
    #: future), which aiokafka's bridged clients also answer.
    librdkafka: bool = attrs.field(default=False, kw_only=True)
    #: Its client blocks on the caller's thread. False: an asyncio client, which a synchronous
    #: caller reaches through an event loop of its own (aio._bridge); the fault suites, the
    #: 3-node failovers and the executor benchmarks build theirs synchronously.
    synchronous: bool = attrs.field(default=True, kw_only=True)
    #: Its TLS and SASL come from settings that name files (``ssl_cafile``...); aiokafka's
    #: take an ``ssl.SSLContext``.
    tls_files: bool = attrs.field(default=True, kw_only=True)
    #: Its consumer fails fast when every bootstrap address refuses (ours, or the library's).
    fail_fast: bool = attrs.field(default=True, kw_only=True)
    #: The executor's exactly-once holds across rebalances (KIP-447): its transactional
    #: producer sends a member's group metadata, so the broker refuses a replaced member's
    #: offsets. aiokafka's sends a group id only.
    exactly_once: bool = attrs.field(default=True, kw_only=True)
    #: The executor renews its dead-letter and transactional producers on this family.
    producer_renewal: bool = attrs.field(default=True, kw_only=True)
    #: The Spark source's ``client`` option can read ranges with it (a Spark task reads
    #: synchronously: an event loop per task would only add a thread hop to every fetch); its
    #: folder then has the Spark adapter ``_spark.py`` (:meth:`spark`).
    spark_reader: bool = attrs.field(default=True, kw_only=True)
    #: Its consumer can join with the consumer group protocol (KIP-848,
    #: ``group.protocol=consumer``), and log librdkafka's ``debug`` contexts.
    consumer_protocol: bool = attrs.field(default=False, kw_only=True)
    #: Its consumer lives on the caller's event loop, so the executor's ``run_async()`` runs
    #: over it in that loop (``async def`` handlers as tasks there); the fault suites run their
    #: executor that way on the families that have it.
    caller_loop: bool = attrs.field(default=False, kw_only=True)

    @property
    def package(self) -> str:
        """The family's folder (``priority_kafka.confluent``): where its adapter modules are,
        as a test patches them."""
        return self.module.rpartition(".")[0]

    def installed(self) -> bool:
        """Whether the client library can be imported."""
        import importlib.util  # not at import: it loads threading; the registry stays light

        return importlib.util.find_spec(self.library) is not None

    def load(self) -> ModuleType:
        """The family's ``_family`` module (importing the client library); ConfigError naming
        the extra to install when the library is missing."""
        return self._import(self.module)

    def spark(self) -> ModuleType:
        """The family's Spark adapter, ``<its folder>._spark``: ``Driver(options)`` (the
        driver's metadata, offset and commit calls, a ``spark.driver.KafkaDriver``) and
        ``Reader(options, offset_range)`` (an executor's range reader, a
        ``spark.columns.PartitionReader``), imported on first use as :meth:`load`;
        ConfigError when the family has no :attr:`spark_reader`."""
        if not self.spark_reader:
            raise ConfigError(f"the {self.name} client family has no Spark reader")
        return self._import(f"{self.package}._spark")

    def _import(self, module: str) -> ModuleType:
        try:
            return importlib.import_module(module)
        except ImportError as exc:
            if self.installed():
                raise
            raise ConfigError(
                f"the {self.name} client family needs {self.distribution}: pip install "
                f"'priority-kafka[{self.extra}]' ({exc})"
            ) from None

    def owns(self, consumer: object) -> bool:
        """Whether ``consumer`` is one of this family's (theirs or ours over it). A process
        that never imported the library holds none, and is not made to import it."""
        return self.library in sys.modules and bool(self.load().owns(consumer))

    def key(self, dotted: str) -> str:
        """A setting's name as this family spells it, from the dotted (Java) name of a setting
        that both families name alike (``group.id``, ``auto.offset.reset``)."""
        return dotted.replace(".", "_") if self.key_style == "kafka-python" else dotted

    def spell(self, dotted: Mapping[str, Any]) -> dict[str, Any]:
        """Settings both families name alike, given by their dotted names, in this family's
        spelling (:meth:`key` of each)."""
        return {self.key(name): value for name, value in dotted.items()}

    def settings_of(self, settings: Mapping[str, Any], style: KeyStyle) -> dict[str, Any]:
        """``settings`` spelled in ``style``, in this family's spelling (the one translation)."""
        if style == self.key_style:
            return dict(settings)
        return to_librdkafka(settings) if style == "kafka-python" else to_kafka_python(settings)

    def can(self, *capabilities: str) -> bool:
        """Whether the family has every one of ``capabilities`` (the boolean fields above, by
        name); ValueError naming one that is not a capability."""
        unknown = sorted(set(capabilities) - CAPABILITIES)
        if unknown:
            raise ValueError(f"not a capability of a client family: {', '.join(unknown)}")
        return all(getattr(self, capability) for capability in capabilities)


#: The names of :class:`Family`'s capabilities (its keyword-only boolean fields).
CAPABILITIES = frozenset(field.name for field in attrs.fields(Family) if field.kw_only)

KAFKA_PYTHON = Family(
    "kafka-python", "kafka-python", "kafka", "priority_kafka.kafka_python._family",
    "kafka-python",
)
CONFLUENT = Family(
    "confluent", "librdkafka", "confluent_kafka", "priority_kafka.confluent._family",
    "confluent-kafka", "confluent", librdkafka=True, consumer_protocol=True,
)
#: aiokafka: asyncio. Its settings are kafka-python's names; its own ``_family`` builds a
#: consumer or producer for a synchronous caller on an event loop of its own (aio._bridge).
AIOKAFKA = Family(
    "aiokafka", "kafka-python", "aiokafka", "priority_kafka.aio._family", "aiokafka", "aio",
    synchronous=False, tls_files=False, fail_fast=False, exactly_once=False,
    producer_renewal=False, spark_reader=False, caller_loop=True,
)
#: Every family; the first is the default (kafka-python is a dependency, the others extras).
FAMILIES = (KAFKA_PYTHON, CONFLUENT, AIOKAFKA)
DEFAULT = KAFKA_PYTHON
#: Their names, as ``--client`` choices.
NAMES = tuple(one.name for one in FAMILIES)
# Fastest reader first: what a ``client`` of ``auto`` picks among the installed families
# (aiokafka is never picked for a synchronous reader: it would need a loop of its own).
_BY_SPEED = (CONFLUENT, KAFKA_PYTHON)


def family(name: str) -> Family:
    """The family called ``name`` (any case); ConfigError naming the known ones otherwise."""
    for one in FAMILIES:
        if isinstance(name, str) and name.lower() == one.name:
            return one
    raise ConfigError(
        f"unknown client family {name!r}: one of {', '.join(map(repr, NAMES))}"
    )


def family_of(consumer: object) -> Family | None:
    """The family whose consumer ``consumer`` is, None for none (an adapter, a test fake)."""
    for one in FAMILIES:
        if one.owns(consumer):
            return one
    return None


def having(*capabilities: str) -> tuple[Family, ...]:
    """The families with every one of ``capabilities`` (:meth:`Family.can`), in registry
    order."""
    return tuple(one for one in FAMILIES if one.can(*capabilities))


def preferred_installed() -> Family:
    """The fastest family whose library is installed (the default is always)."""
    return next(one for one in _BY_SPEED if one.installed())


# Settings (kafka-python's names, dotted) whose librdkafka name differs; the value is
# librdkafka's name, or (name, to librdkafka, back) where the value changes too.
_RENAMED: dict[str, str | tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = {
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "request.timeout.ms": "socket.timeout.ms",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "sasl.plain.username": "sasl.username",
    "sasl.plain.password": "sasl.password",
    "ssl.cafile": "ssl.ca.location",
    "ssl.certfile": "ssl.certificate.location",
    "ssl.keyfile": "ssl.key.location",
    "ssl.password": "ssl.key.password",
    "ssl.crlfile": "ssl.crl.location",
    "ssl.ciphers": "ssl.cipher.suites",
    "ssl.check.hostname": (
        "ssl.endpoint.identification.algorithm",
        lambda check: "https" if check else "none",
        lambda algorithm: str(algorithm).lower() != "none",
    ),
}
# Settings both libraries know by the same (dotted) name.
_SAME = frozenset({
    "allow.auto.create.topics", "auto.commit.interval.ms", "check.crcs", "client.dns.lookup",
    "client.id", "client.rack", "connections.max.idle.ms", "fetch.max.bytes", "fetch.min.bytes",
    "heartbeat.interval.ms", "isolation.level", "max.in.flight.requests.per.connection",
    "max.partition.fetch.bytes", "max.poll.interval.ms", "metadata.max.age.ms",
    "receive.message.max.bytes", "reconnect.backoff.max.ms", "reconnect.backoff.ms",
    "retry.backoff.ms", "sasl.kerberos.service.name", "sasl.mechanism", "security.protocol",
    "session.timeout.ms",
})
_BACK = {
    (rename if isinstance(rename, str) else rename[0]): (name, rename)
    for name, rename in _RENAMED.items()
}


def to_librdkafka(settings: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python ``settings`` (``group_id`` or ``group.id``) as librdkafka properties;
    KeyError naming the first (dotted) setting librdkafka has no equivalent for."""
    mapped: dict[str, Any] = {}
    for name, value in settings.items():
        dotted = name.replace("_", ".")
        rename = _RENAMED.get(dotted)
        if dotted in _SAME:
            mapped[dotted] = value
        elif isinstance(rename, tuple):
            mapped[rename[0]] = rename[1](value)
        elif rename is not None:
            mapped[rename] = value
        else:
            raise KeyError(dotted)
    return mapped


def to_kafka_python(properties: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka ``properties`` as kafka-python settings (the inverse of
    :func:`to_librdkafka`); KeyError naming the first property kafka-python has no name for."""
    mapped: dict[str, Any] = {}
    for name, value in properties.items():
        if name in _SAME:
            mapped[name.replace(".", "_")] = value
        elif name in _BACK:
            kafka_name, rename = _BACK[name]
            mapped[kafka_name.replace(".", "_")] = (
                rename[2](value) if isinstance(rename, tuple) else value
            )
        else:
            raise KeyError(name)
    return mapped
