"""The options of the ``priority_kafka`` Spark data source, parsed and validated on the driver.

Option names follow Spark's own Kafka source where the meaning is the same; they are
case-insensitive, like every Spark option. :func:`parse_options` turns Spark's string options
into a frozen :class:`SourceOptions` or raises ConfigError naming the option, what it expects
and what it got, so a bad option fails when the DataFrame is defined, before any job runs.
No Kafka call happens here: topics and offsets are resolved when a query plans its reads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from priority_kafka._checks import MAX_PRIORITY, MAX_RECORDS, MAX_WINDOW, shown
from priority_kafka._properties import nearest
from priority_kafka.burst import CapacityBurst
from priority_kafka.distributors import (
    Distributor,
    ExponentialDistributor,
    LinearDistributor,
    WeightedDistributor,
    distribute,
    parse_distributor,
)
from priority_kafka.errors import ConfigError
from priority_kafka.families import (
    DEFAULT,
    family,
    having,
    preferred_installed,
    to_librdkafka,
)
from priority_kafka.naming import level_pattern, priority_topics, split_priority_topic
from priority_kafka.spark.ranges import EARLIEST, LATEST, TopicPartitionKey

__all__ = [
    "CLIENTS",
    "OffsetSpec",
    "SourceOptions",
    "TopicSelection",
    "parse_options",
]

#: ``"earliest"``, ``"latest"``, or explicit offsets per priority-topic partition, where -2
#: means earliest and -1 latest (Spark's JSON convention).
OffsetSpec = Literal["earliest", "latest"] | Mapping[TopicPartitionKey, int]

_KAFKA_PREFIX = "kafka."
# Settings the source owns: reads assign partitions and seek, they never join a group or reset.
_RESERVED_KAFKA = {
    "auto.offset.reset": "set 'startingOffsets' instead",
    "enable.auto.commit": "the source commits only with 'kafka.group.id', after each batch",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
}
_OWN_OPTIONS = {
    "assign", "subscribe", "subscribepattern", "startingoffsets", "endingoffsets",
    "maxoffsetspertrigger", "minpartitions", "failondataloss", "includeheaders",
    "maxpriority", "distributor", "historywindowsize", "maxoutthreshold",
    "kafkaconsumer.polltimeoutms", "client",
}
_DEFAULT_REQUEST_TIMEOUT_MS = 30_000  # kafka-python's request_timeout_ms default
#: The ``client`` option's values: which library executors read offset ranges with (the
#: families whose :attr:`~priority_kafka.families.Family.spark_reader` says they can).
CLIENTS = ("auto", *(one.name for one in having("spark_reader")))
_DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's default, spark.network.timeout
_MAX_POLL_TIMEOUT_MS = 3_600_000  # one hour
_MAX_PARTITIONS = 1_000_000  # Spark tasks per batch
# kafka.* integer settings are Java ints (bytes, counts, milliseconds) in the Java client.
_MAX_KAFKA_INT = 2**31 - 1
_MAX_OFFSET = 2**63 - 1  # offsets are Java longs


def _kafka_python_defaults() -> dict[str, Any]:
    from kafka import KafkaConsumer

    return dict(KafkaConsumer.DEFAULT_CONFIG)


@attrs.frozen
class TopicSelection:
    """Which priority topics to read: exactly one of subscribe, subscribePattern, assign.

    ``subscribe`` holds logical topics (``orders``: read ``orders-0`` .. ``orders-<N-1>``),
    ``pattern`` a regex the whole logical topic name must match, ``assign`` explicit
    priority-topic partitions.
    """

    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartitionKey, ...] = ()


@attrs.frozen
class SourceOptions:
    """Every option of the data source, validated; see ``docs/spark.md`` for each one."""

    bootstrap_servers: str
    topics: TopicSelection
    max_priority: int
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    distributor: Distributor
    history_window_size: int
    maxout_threshold: int
    poll_timeout_ms: int
    group_id: str | None
    #: kafka-python ``KafkaConsumer`` settings from the ``kafka.*`` options, typed.
    kafka_params: Mapping[str, Any] = attrs.field(factory=dict)
    #: The family executors read ranges with (:data:`priority_kafka.families.NAMES`; the
    #: ``client`` option with ``auto`` resolved when the options are parsed).
    client: str = DEFAULT.name
    #: The ``kafka.*`` options as librdkafka properties (only with the confluent client).
    confluent_params: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def request_timeout_s(self) -> float:
        """How long one metadata or offsets request may wait, on either client: the
        ``kafka.request.timeout.ms`` option, else kafka-python's default of 30 s."""
        return self.kafka_params.get("request_timeout_ms", _DEFAULT_REQUEST_TIMEOUT_MS) / 1000

    def new_burst(self, limit: int) -> CapacityBurst:
        """A fresh CapacityBurst for a trigger limit of ``limit`` records."""
        reserved = distribute(self.distributor, self.max_priority, limit)
        return CapacityBurst(reserved, self.history_window_size, self.maxout_threshold)


def _text(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _int_option(
    options: Mapping[str, str], name: str, default: int | None, minimum: int, maximum: int
) -> Any:
    text = _text(options, name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:  # also for more than 4300 digits
        raise ConfigError(f"Option '{name}' must be an integer (got {shown(text)}).") from None
    if value < minimum:
        raise ConfigError(f"Option '{name}' must be at least {minimum} (got {value}).")
    if value > maximum:
        raise ConfigError(f"Option '{name}' must be at most {maximum} (got {value}).")
    return value


def _bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = _text(options, name)
    if text is None:
        return default
    if text.lower() not in ("true", "false"):
        raise ConfigError(f"Option '{name}' must be 'true' or 'false' (got {shown(text)}).")
    return text.lower() == "true"


def _load_json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"Option '{name}' is not valid JSON: {exc.msg} (got {shown(text)})."
        ) from None
    # An integer of more than 4300 digits (ValueError), nesting deeper than the stack.
    except (ValueError, RecursionError) as exc:
        raise ConfigError(
            f"Option '{name}' cannot be read: {exc} (got {shown(text)})."
        ) from None


def _checked_topic(name: str, topic: object, max_priority: int) -> str:
    """Return ``topic`` if it names a priority topic of a level below ``max_priority``."""
    try:
        level = split_priority_topic(topic)[1]  # type: ignore[arg-type]
    except ConfigError as exc:
        raise ConfigError(f"Option '{name}': {exc}") from None
    if level >= max_priority:
        raise ConfigError(
            f"Option '{name}' names {shown(topic)}, level {level}, but 'maxPriority' is "
            f"{max_priority} (levels 0..{max_priority - 1})."
        )
    return str(topic)


def _partition_number(name: str, topic: str, partition: object) -> int:
    try:
        number = int(partition)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):  # OverflowError: JSON's Infinity
        number = -1
    if (
        isinstance(partition, bool)
        or not 0 <= number <= _MAX_KAFKA_INT
        or str(number) != str(partition)
    ):
        raise ConfigError(
            f"Option '{name}' has a bad partition {shown(partition)} for topic {shown(topic)}; "
            "partitions are non-negative integers."
        )
    return number


def _parse_assign(text: str, max_priority: int) -> tuple[TopicPartitionKey, ...]:
    document = _load_json("assign", text)
    if not isinstance(document, dict) or not document:
        raise ConfigError(
            'Option \'assign\' must be a JSON object like {"orders-2": [0, 1]} '
            f"(got {shown(text)})."
        )
    keys: list[TopicPartitionKey] = []
    for topic, partitions in document.items():
        topic = _checked_topic("assign", topic, max_priority)
        if not isinstance(partitions, list) or not partitions:
            raise ConfigError(
                f"Option 'assign' must list the partitions of {shown(topic)} as a non-empty JSON "
                f"array (got {shown(partitions)})."
            )
        keys += [(topic, _partition_number("assign", topic, p)) for p in partitions]
    return tuple(sorted(set(keys)))


_SPECIAL = {EARLIEST: "-2 (earliest)", LATEST: "-1 (latest)"}


def _parse_offsets(
    name: str, text: str | None, default: str, special: tuple[int, ...], max_priority: int
) -> OffsetSpec:
    """Parse ``startingOffsets`` / ``endingOffsets``: a keyword, or per-partition JSON.

    ``special`` lists the keywords this option accepts, as their JSON values (-2 earliest,
    -1 latest); the same ones are allowed as offsets in the JSON form.
    """
    value = text if text is not None else default
    keywords = {"earliest": EARLIEST, "latest": LATEST}
    if keywords.get(value.lower()) in special:
        return value.lower()  # type: ignore[return-value]
    if not value.startswith("{"):
        allowed = " or ".join(repr(k) for k, v in keywords.items() if v in special)
        raise ConfigError(
            f"Option '{name}' must be {allowed}, or a JSON object like "
            f'{{"orders-2": {{"0": 42}}}} (got {shown(value)}).'
        )
    document = _load_json(name, value)
    if not isinstance(document, dict):
        raise ConfigError(
            f"Option '{name}' must be a JSON object of priority topic to partition offsets "
            f"(got {shown(value)})."
        )
    offsets: dict[TopicPartitionKey, int] = {}
    for topic, partitions in document.items():
        topic = _checked_topic(name, topic, max_priority)
        if not isinstance(partitions, dict):
            raise ConfigError(
                f"Option '{name}' must map {shown(topic)} to a JSON object of partition to offset "
                f"(got {shown(partitions)})."
            )
        for partition, offset in partitions.items():
            number = _partition_number(name, topic, partition)
            if (
                isinstance(offset, bool)
                or not isinstance(offset, int)
                or (offset < 0 and offset not in special)
                or offset > _MAX_OFFSET
            ):
                meanings = "".join(f", or {_SPECIAL[s]}" for s in special)
                raise ConfigError(
                    f"Option '{name}' has a bad offset {shown(offset)} for {shown(topic)} "
                    f"partition {number}; offsets are integers from 0 to {_MAX_OFFSET}"
                    f"{meanings}."
                )
            offsets[(topic, number)] = offset
    return offsets


def _parse_distributor(
    text: str | None, max_priority: int
) -> ExponentialDistributor | LinearDistributor | WeightedDistributor:
    if text is None:
        return ExponentialDistributor()
    try:
        distributor = parse_distributor(text, "distributor")
    except ConfigError as exc:
        raise ConfigError(f"Option {exc}") from None
    if isinstance(distributor, WeightedDistributor) and len(text.split(",")) != max_priority:
        raise ConfigError(
            f"Option 'distributor' must give one weight per level: 'maxPriority' is "
            f"{max_priority} but {shown(text)} has {len(text.split(','))}."
        )
    return distributor


def _kafka_params(options: Mapping[str, str]) -> tuple[dict[str, Any], str | None]:
    """Return the ``kafka.*`` options as typed kafka-python settings, and ``kafka.group.id``."""
    defaults = _kafka_python_defaults()
    params: dict[str, Any] = {}
    group_id = None
    for key, raw in options.items():
        if not key.lower().startswith(_KAFKA_PREFIX) or key.lower() == "kafka.bootstrap.servers":
            continue
        java_name = key[len(_KAFKA_PREFIX):].lower()
        if java_name == "group.id":
            group_id = str(raw).strip()
            if not group_id:
                raise ConfigError(
                    f"Option '{key}' must be a non-empty group id (got {shown(raw)})."
                )
            continue
        if java_name in _RESERVED_KAFKA:
            raise ConfigError(
                f"Option '{key}' is not supported: {_RESERVED_KAFKA[java_name]}."
            )
        name = java_name.replace(".", "_")
        if name not in defaults:
            raise ConfigError(
                f"Option '{key}' is not a kafka-python consumer setting ({shown(name)} is "
                f"unknown{nearest(java_name, defaults, prefix=_KAFKA_PREFIX)})."
            )
        params[name] = _typed(key, str(raw), defaults[name])
    return params, group_id


def _client(options: Mapping[str, str]) -> str:
    """The ``client`` option, ``auto`` resolved: confluent when confluent-kafka imports."""
    text = (_text(options, "client") or "auto").lower()
    if text not in CLIENTS:
        raise ConfigError(
            f"Option 'client' must be one of {', '.join(map(repr, CLIENTS))} (got {text!r})."
        )
    if text == "auto":
        return preferred_installed().name
    chosen = family(text)
    if not chosen.installed():
        raise ConfigError(
            f"Option 'client' is {text!r} but {chosen.distribution} is not installed "
            f"(pip install 'priority-kafka[{chosen.extra}]')."
        )
    return chosen.name


def _librdkafka_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Map typed kafka-python settings (``params``) to librdkafka properties.

    Raises ConfigError naming the ``kafka.*`` option when librdkafka has no equivalent.
    """
    try:
        return to_librdkafka(params)
    except KeyError as exc:
        raise ConfigError(
            f"Option 'kafka.{exc.args[0]}' has no librdkafka equivalent, so the confluent client "
            f"cannot read with it; drop it or set the option 'client' to {DEFAULT.name!r} "
            "(docs/spark.md lists the mapping)."
        ) from None


def _typed(key: str, text: str, default: Any) -> Any:
    """Convert a string option to the type of kafka-python's default for that setting."""
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"Option '{key}' must be 'true' or 'false' (got {shown(text)}).")
        return text.lower() == "true"
    if isinstance(default, float):  # consumer_timeout_ms, whose default is inf
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if math.isnan(number) or number < 0:
            raise ConfigError(
                f"Option '{key}' must be a number >= 0 or inf (got {shown(text)})."
            )
        return number
    if isinstance(default, int):
        try:
            integer = int(text)
        except ValueError:  # also for more than 4300 digits
            integer = -1
        if not 0 <= integer <= _MAX_KAFKA_INT:
            raise ConfigError(
                f"Option '{key}' must be a number: an integer from 0 to {_MAX_KAFKA_INT} "
                f"(got {shown(text)})."
            )
        return integer
    if default is None or isinstance(default, str):
        return text
    raise ConfigError(
        f"Option '{key}' cannot be given as a string: kafka-python expects "
        f"{type(default).__name__} there."
    )


def _topic_selection(options: Mapping[str, str], max_priority: int) -> TopicSelection:
    given = {
        name: text
        for name in ("subscribe", "subscribePattern", "assign")
        if (text := _text(options, name)) is not None
    }
    if len(given) != 1:
        raise ConfigError(
            "Exactly one of the options 'subscribe', 'subscribePattern' and 'assign' must be "
            f"given to name the topics to read (got {sorted(given) or 'none'})."
        )
    ((name, text),) = given.items()
    if name == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        for topic in topics:
            try:
                priority_topics(topic, max_priority)
            except ConfigError as exc:
                raise ConfigError(f"Option 'subscribe': {exc}") from None
        return TopicSelection(subscribe=topics)
    if name == "subscribePattern":
        try:
            level_pattern(text, max_priority - 1)  # what each level subscribes with
        except ConfigError as exc:
            raise ConfigError(f"Option 'subscribePattern' is not a valid regex: {exc}") from None
        return TopicSelection(pattern=text)
    return TopicSelection(assign=_parse_assign(text, max_priority))


def parse_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Validate Spark's options for a streaming or batch read and return them typed.

    ``streaming`` None checks only what holds for both kinds of read: Spark asks for the
    schema when the DataFrame is defined, before it says whether the read is a stream. Raises
    ConfigError for a missing or malformed option, naming it; unknown options are rejected too,
    so a misspelt limit does not silently read everything.
    """
    lowered = {str(key).lower(): value for key, value in options.items()}
    unknown = sorted(
        key for key in lowered if key not in _OWN_OPTIONS and not key.startswith(_KAFKA_PREFIX)
    )
    if unknown:
        hint = "".join(nearest(key, _OWN_OPTIONS, respell=False) for key in unknown[:1])
        raise ConfigError(
            f"Unknown option(s) {unknown} for the priority_kafka source{hint} (option names "
            "are case-insensitive); see docs/spark.md."
        )
    servers = _text(lowered, "kafka.bootstrap.servers")
    if servers is None:
        raise ConfigError(
            "Option 'kafka.bootstrap.servers' is required: the Kafka brokers to read from, "
            "as 'host:port[,host:port...]'."
        )
    max_priority = _int_option(lowered, "maxPriority", 3, minimum=1, maximum=MAX_PRIORITY)
    topics = _topic_selection(lowered, max_priority)
    ending_text = _text(lowered, "endingOffsets")
    if streaming is True and ending_text is not None:
        raise ConfigError(
            "Option 'endingOffsets' is for batch reads only; a stream reads until stopped "
            "(use Trigger.AvailableNow to stop at the offsets available when it starts)."
        )
    starting = _parse_offsets(
        "startingOffsets", _text(lowered, "startingOffsets"),
        "latest" if streaming is True else "earliest",
        (EARLIEST,) if streaming is False else (EARLIEST, LATEST),
        max_priority,
    )
    ending = _parse_offsets("endingOffsets", ending_text, "latest", (LATEST,), max_priority)
    distributor = _parse_distributor(_text(lowered, "distributor"), max_priority)
    window = _int_option(lowered, "historyWindowSize", 6, minimum=1, maximum=MAX_WINDOW)
    threshold = _int_option(lowered, "maxoutThreshold", 4, minimum=1, maximum=MAX_WINDOW)
    if threshold > window:
        raise ConfigError(
            f"Option 'maxoutThreshold' must be at most 'historyWindowSize' {window} "
            f"(got {threshold})."
        )
    limit = _int_option(lowered, "maxOffsetsPerTrigger", None, minimum=1, maximum=MAX_RECORDS)
    kafka_params, group_id = _kafka_params(lowered)
    client = _client(lowered)
    source = SourceOptions(
        bootstrap_servers=servers,
        topics=topics,
        max_priority=max_priority,
        starting_offsets=starting,
        ending_offsets=ending,
        max_offsets_per_trigger=limit,
        min_partitions=_int_option(
            lowered, "minPartitions", None, minimum=1, maximum=_MAX_PARTITIONS
        ),
        fail_on_data_loss=_bool_option(lowered, "failOnDataLoss", True),
        include_headers=_bool_option(lowered, "includeHeaders", False),
        distributor=distributor,
        history_window_size=window,
        maxout_threshold=threshold,
        poll_timeout_ms=_int_option(
            lowered, "kafkaConsumer.pollTimeoutMs", _DEFAULT_POLL_TIMEOUT_MS,
            minimum=1, maximum=_MAX_POLL_TIMEOUT_MS,
        ),
        group_id=group_id,
        kafka_params=kafka_params,
        client=client,
        confluent_params=(
            _librdkafka_params(kafka_params) if family(client).key_style == "librdkafka" else {}
        ),
    )
    if limit is not None:
        minimum = distributor.minimum_records(max_priority)
        if limit < minimum:
            # In the option's own words: the distributor's error names max_poll_records.
            raise ConfigError(
                f"Option 'maxOffsetsPerTrigger' must be at least {minimum} to give each of "
                f"{max_priority} priority levels a share with distributor {shown(distributor)} "
                f"(got {limit})."
            )
        source.new_burst(limit)
    return source
