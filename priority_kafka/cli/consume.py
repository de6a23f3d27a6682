"""``priority-kafka consume`` (alias ``run``): a handler on every record, with a live view.

Consumes with a :class:`~priority_kafka.ShardedExecutor` (over a
:class:`~priority_kafka.PriorityConsumer` with ``--max-priority``); SIGTERM or Ctrl-C stops it
gracefully (running handlers finish, the completed watermark is committed).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from priority_kafka.cli._common import (
    CliError,
    add_app_dir,
    add_bootstrap,
    add_json,
    emit_json,
    example,
    handler_spec,
    load_handler,
    note,
    positive,
    properties_file,
    setting,
    settings,
)
from priority_kafka.cli._levels import add_wait_for_topics, resolve_levels
from priority_kafka.cli._view import LiveView, Row
from priority_kafka.errors import ConfigError, HandlerError
from priority_kafka.families import DEFAULT, FAMILIES, KAFKA_PYTHON, NAMES, family
from priority_kafka.metrics import Metrics, executor_stats

VIEW_COLUMNS = ("level", "handled", "rec/s", "quota", "last", "bursts", "lag", "p50 ms",
                "p99 ms")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "consume", aliases=["run"],
        help="handle every record of topics with a ShardedExecutor, with a live view",
        description="Consume topics (priority topics with --max-priority) and run HANDLER on "
        "each record with key-ordered parallelism, showing per level: records/s, quotas and "
        "bursts, lag and latency (record timestamp to handler end). SIGTERM/SIGINT stop "
        "gracefully; so do --duration and --max-records.",
        epilog=example("priority-kafka consume mypkg.handlers:handle -t orders --max-priority 3 "
                       "-g billing -b localhost:9092 --shards 32 --metrics-port 9400"),
    )
    parser.add_argument("handler", type=handler_spec,
                        help="package.module:function taking a record")
    add_app_dir(parser)
    parser.add_argument("--topic", "-t", action="append", required=True,
                        help="topic (repeatable)")
    add_bootstrap(parser)
    parser.add_argument("--group-id", "-g", required=True)
    parser.add_argument(
        "--max-priority", "-n", type=positive(int), default=None,
        help="read <topic>-0 .. <topic>-(N-1) with a PriorityConsumer (default: the levels the "
        "topics have on the broker; a topic without levels is read as a plain topic); a level "
        "at or above N that exists is an error",
    )
    add_wait_for_topics(parser)
    parser.add_argument(
        "--client", default=DEFAULT.name, choices=NAMES,
        help="client family: " + ", ".join(
            f"{one.name} (extra [{one.extra}])" if one.extra else one.name for one in FAMILIES
        ) + f"; default {DEFAULT.name}; --consumer-config keys are that client's",
    )
    parser.add_argument("--shards", type=positive(int), default=16,
                        help="worker threads (default 16)")
    parser.add_argument("--ordering", default="key", choices=("key", "partition", "unordered"))
    parser.add_argument("--auto-offset-reset", default="earliest", choices=("earliest", "latest"))
    parser.add_argument("--failure-policy", default="stop", choices=("stop", "dead_letter"))
    parser.add_argument("--dead-letter-topic")
    parser.add_argument("--max-attempts", type=positive(int), default=3,
                        help="handler calls per record before the failure policy (default 3)")
    parser.add_argument(
        "--consumer-config", "-c", action="append", default=[], metavar="KEY=VALUE",
        type=setting, help="extra consumer setting, as text (repeatable): each becomes the type "
        "its client documents (50, true, ...); @FILE reads a Java .properties file",
    )
    parser.add_argument(
        "--config-file", action="append", dest="consumer_config", metavar="FILE",
        type=properties_file, help="consumer settings from a Java .properties file (as -c @FILE)",
    )
    parser.add_argument("--duration", type=positive(float, 0.1), default=None,
                        help="stop after this many seconds")
    parser.add_argument("--max-records", type=positive(int), default=None,
                        help="stop once this many records are handled")
    parser.add_argument("--metrics-port", type=positive(int, 0), default=None,
                        help="serve Prometheus metrics on 127.0.0.1:PORT/metrics")
    parser.add_argument(
        "--budget", action="append", default=[], metavar="NAME=RATE", type=budget_flag,
        help="a downstream rate budget, records/s, split by priority (repeatable: one per "
        "resource; with several, --budget-header names each record's resource); "
        "see docs/budgets.md",
    )
    parser.add_argument("--budget-header", metavar="HEADER",
                        help="the record header whose value names its budget's resource")
    parser.add_argument("--quiet", "-q", action="store_true", help="no live view")
    add_json(parser)
    parser.set_defaults(run=run)


def budget_flag(text: str) -> tuple[str, Any]:
    """argparse type for ``--budget NAME=RATE``: the bad value named when it is not one."""
    from priority_kafka.budgets import parse_budget

    try:
        return parse_budget(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def header_resource(header: str) -> Callable[[Any], str]:
    """The resource of a record: its ``header`` value, as text (absent: '')."""
    wanted = header.encode()

    def resource(record: Any) -> str:
        for key, value in getattr(record, "headers", None) or ():
            if key in (header, wanted):
                return value.decode() if isinstance(value, bytes) else str(value)
        return ""

    return resource


def budgets_of(args: argparse.Namespace) -> Any:
    """The executor's ``budgets`` from ``--budget`` and ``--budget-header`` (None: none)."""
    from priority_kafka.budgets import Budgets

    if not args.budget:
        if args.budget_header:
            raise CliError("--budget-header needs at least one --budget NAME=RATE")
        return None
    resource = header_resource(args.budget_header) if args.budget_header else None
    try:
        return Budgets(dict(args.budget), resource=resource)
    except ConfigError as exc:
        raise CliError(f"--budget: {exc}") from None


def budget_line(executor: Any) -> str:
    """The live view's budgets: per resource, the rate now and what waits, per level."""
    parts = []
    for name, levels in executor.budget_stats().items():
        rate = next(iter(levels.values())).rate
        waiting = "/".join(str(stats.waiting) for stats in levels.values())
        parts.append(f"budget {name} {rate:.0f}/s waiting {waiting}")
    return "; ".join(parts)


class Rates:
    """Records/s per key from successive cumulative counts, over the last ``span_s`` seconds."""

    def __init__(self, span_s: float = 3.0) -> None:
        self._span_s = span_s
        self._history: collections.deque[tuple[float, dict[int, int]]] = collections.deque(
            [(time.monotonic(), {})]
        )

    def update(self, counts: Mapping[int, int]) -> dict[int, float]:
        now = time.monotonic()
        self._history.append((now, dict(counts)))
        while len(self._history) > 2 and now - self._history[1][0] >= self._span_s:
            self._history.popleft()
        then, old = self._history[0]
        elapsed = now - then
        if elapsed <= 0:
            return dict.fromkeys(counts, 0.0)
        return {key: (value - old.get(key, 0)) / elapsed for key, value in counts.items()}


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def view_rows(metrics: Metrics, rates: Rates) -> Callable[[], Sequence[Row]]:
    """A ``rows()`` for :class:`LiveView`: one row per level, highest first."""

    def rows() -> list[Row]:
        snapshot = metrics.snapshot(refresh_lag=False)
        handled = {level: h["count"] for level, h in metrics.handler_duration.histogram().items()}
        per_second = rates.update(handled)
        lag: dict[int, int] = collections.Counter()
        for values in snapshot["partitions"].values():
            lag[values["level"]] += values["lag"]
        levels = sorted(set(snapshot["levels"]) | set(handled) | set(lag), reverse=True)
        result: list[Row] = []
        for level in levels:
            consumer = snapshot["levels"].get(level, {})
            latency = snapshot["latency"].get(level, {})
            result.append((
                level, handled.get(level, 0), f"{per_second.get(level, 0.0):.0f}",
                consumer.get("reserved_quota", "-"), consumer.get("last_quota", "-"),
                consumer.get("burst_count", "-"), lag.get(level, "-") if snapshot["partitions"]
                else "-", _ms(latency.get("latency_p50_s")), _ms(latency.get("latency_p99_s")),
            ))
        return result

    return rows


def view_title(metrics: Metrics, label: str) -> Callable[[], str]:
    def title() -> str:
        stats = executor_stats(metrics.executor.stats()) if metrics.executor else {}
        paused = sum(v["paused_partitions"] for v in metrics.consumer_levels().values())
        budgets = budget_line(metrics.executor) if metrics.executor else ""
        return (f"{label} | in flight {stats.get('in_flight', 0)}, queued "
                f"{stats.get('queued', 0)}, running {stats.get('running', 0)}, paused "
                f"{paused}, retries {stats.get('retries', 0)}, dead-lettered "
                f"{stats.get('dead_lettered', 0)}, commits {stats.get('commits', 0)}"
                + (f" | {budgets}" if budgets else ""))

    return title


@contextlib.contextmanager
def observed(metrics: Metrics, port: int | None, label: str, quiet: bool,
             plain_stream: Any = None) -> Iterator[None]:
    """Lag refresh, the optional Prometheus endpoint and the live view, for the block."""
    metrics.start_lag_refresh(1.0)
    stop_server: Callable[[], None] | None = None
    if port is not None:
        from priority_kafka.metrics import serve_prometheus

        stop_server = serve_prometheus(metrics, port)
        note(f"metrics at http://127.0.0.1:{port}/metrics")
    view = LiveView(VIEW_COLUMNS, view_rows(metrics, Rates()), view_title(metrics, label),
                    plain_stream=plain_stream)
    try:
        if quiet:
            yield
        else:
            with view:
                yield
    finally:
        if stop_server is not None:
            stop_server()
        metrics.close()


def _consumer_configs(args: argparse.Namespace) -> dict[str, Any]:
    """The consumer's settings, in its family's spelling, checked as that family's consumer
    checks them: a misspelt, mistyped or conflicting one is named before the broker is asked."""
    chosen = family(args.client)
    try:
        module = chosen.load()
    except ConfigError as exc:
        raise CliError(f"--client {chosen.name}: {exc}") from None
    configs: dict[str, Any] = {
        chosen.key("bootstrap.servers"): args.bootstrap_servers,
        chosen.key("group.id"): args.group_id,
        chosen.key("auto.offset.reset"): args.auto_offset_reset,
        **args.settings,
        chosen.key("enable.auto.commit"): False,  # the executor commits what is done only
    }
    module.check_consumer_settings(configs, args.max_priority)
    return configs


def _clients(args: argparse.Namespace) -> tuple[Any, Any]:
    """The consumer on ``--client``'s family, and a dead-letter producer for a consumer that
    cannot tell the executor how to connect (None: the executor builds its own)."""
    configs = _consumer_configs(args)  # first: it says when the client library is missing
    dead_letters_to = args.bootstrap_servers if args.failure_policy == "dead_letter" else None
    consumer, producer = family(args.client).load().executor_consumer(
        configs, args.max_priority, dead_letters_to
    )
    return consumer, producer


_SECURITY = ("ssl.", "sasl.", "security.protocol")


def _lag_security(args: argparse.Namespace) -> dict[str, Any]:
    """The ``-c`` security settings (TLS, SASL) in kafka-python's names, for the lag reader (a
    kafka-python admin client), so it reaches the same brokers the same way; other consumer
    settings, and those kafka-python has no name for, mean nothing to it."""
    chosen = family(args.client)
    prefixes = tuple(chosen.key(prefix) for prefix in _SECURITY)
    translated: dict[str, Any] = {}
    for name, value in args.settings.items():
        if name.startswith(prefixes):
            with contextlib.suppress(KeyError):
                translated.update(KAFKA_PYTHON.settings_of({name: value}, chosen.key_style))
    return translated


def _given_settings(args: argparse.Namespace) -> dict[str, str]:
    """The ``-c`` settings (files included). A ``max.priority`` among them is taken as
    ``--max-priority`` unless that flag is given, which wins as flags win over files."""
    given = settings(args.consumer_config)
    for key in ("max.priority", "max_priority"):
        value = given.pop(key, None)
        if value is not None and args.max_priority is None:
            try:
                args.max_priority = positive(int)(value)
            except argparse.ArgumentTypeError as exc:
                raise CliError(f"-c {key}: {exc}") from None
    return given


def run(args: argparse.Namespace) -> int:
    from priority_kafka import ShardedExecutor
    from priority_kafka.config import ExecutorConfig
    from priority_kafka.metrics import LagReader

    user_handler = load_handler(args.handler, args.app_dir)
    args.settings = _given_settings(args)
    # Every refusal of the flags and settings comes before the broker is asked.
    _consumer_configs(args)
    options: dict[str, Any] = {"failure_policy": args.failure_policy,
                               "max_attempts": args.max_attempts}
    if args.dead_letter_topic:
        options["dead_letter_topic"] = args.dead_letter_topic
    ExecutorConfig(shards=args.shards, ordering=args.ordering, **options)
    budgets = budgets_of(args)
    args.max_priority = resolve_levels(
        args.bootstrap_servers, args.topic, args.max_priority, wait=args.wait_for_topics,
        admin_configs=_lag_security(args), plain=args.max_priority is None,
    )
    consumer, dead_letter_producer = _clients(args)
    metrics = Metrics(consumer)
    done = threading.Event()
    handler = metrics.timed(user_handler)
    if args.max_records:
        counted = handler

        def handler(record: Any) -> Any:
            result = counted(record)
            if sum(h["count"] for h in metrics.handler_duration.histogram().values()) >= \
                    args.max_records:
                done.set()
            return result

    if dead_letter_producer is not None:
        options["dead_letter_producer"] = dead_letter_producer
    executor = ShardedExecutor(
        consumer, handler, shards=args.shards, ordering=args.ordering, budgets=budgets, **options
    )
    metrics.executor = executor
    if len(args.topic) == 1:
        metrics.lag = LagReader(args.bootstrap_servers, args.topic[0], args.group_id,
                                args.max_priority, **_lag_security(args))
    executor.subscribe(args.topic)
    note(f"consuming {', '.join(args.topic)} with {executor!r}; SIGTERM or Ctrl-C stops")
    if args.duration or args.max_records:
        def stop_later() -> None:
            done.wait(args.duration)
            executor.stop()

        timer = threading.Thread(target=stop_later, daemon=True)
        timer.start()
    started = time.monotonic()
    try:
        with observed(metrics, args.metrics_port, "consume", args.quiet or args.json,
                      sys.stderr if args.json else None):
            executor.run()  # the main thread: Ctrl-C and SIGTERM stop it gracefully
    except HandlerError as exc:
        if exc.policy == "stop":
            exc.add_note("to dead-letter a failing record and go on instead, add "
                         "--failure-policy dead_letter --dead-letter-topic TOPIC")
        raise
    finally:
        if dead_letter_producer is not None:
            dead_letter_producer.flush()
    elapsed = time.monotonic() - started
    stats = executor_stats(executor.stats())
    rate = stats["handled"] / elapsed if elapsed > 0 else 0.0
    if args.json:
        emit_json({"executor": stats, "elapsed_s": round(elapsed, 3),
                   "records_per_s": round(rate, 1),
                   "latency": metrics.snapshot(refresh_lag=False)["latency"],
                   "budgets": {name: {level: attrs.asdict(values) for level, values in
                                      levels.items()}
                               for name, levels in executor.budget_stats().items()}})
    else:
        print(f"stopped after {elapsed:.1f} s: handled {stats['handled']} ({rate:.0f} records/s), "
              f"dead-lettered {stats['dead_lettered']}, retries {stats['retries']}, "
              f"commits {stats['commits']}", flush=True)
    return 0
