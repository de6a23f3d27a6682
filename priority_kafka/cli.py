"""``priority-kafka`` (also ``python -m priority_kafka``): a local broker, and the executor.

* ``priority-kafka broker`` runs a single-node Apache Kafka broker in the foreground.
* ``priority-kafka run package.module:handler --topic orders --max-priority 3 ...`` consumes
  with a :class:`~priority_kafka.ShardedExecutor`; SIGTERM or Ctrl-C stops it gracefully
  (running handlers finish, the completed watermark is committed).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from priority_kafka.testing import KAFKA_VERSION, LocalKafkaBroker

__all__ = ["main"]


def _broker(args: argparse.Namespace) -> int:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    properties = dict(item.split("=", 1) for item in args.property)
    with LocalKafkaBroker(properties, log_dir=args.log_dir) as broker:
        print(broker.bootstrap_servers, flush=True)
        print(
            f"Apache Kafka {KAFKA_VERSION} is running (pid {broker.pid}, log {broker.log_file}); "
            "Ctrl-C stops it.",
            file=sys.stderr, flush=True,
        )
        stop.wait()
    return 0


def _handler(spec: str) -> Callable[[Any], Any]:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise argparse.ArgumentTypeError(f"expected package.module:function (got {spec!r})")
    try:
        handler = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise argparse.ArgumentTypeError(f"cannot load handler {spec!r}: {exc}") from exc
    if not callable(handler):
        raise argparse.ArgumentTypeError(f"handler {spec!r} is not callable")
    return handler


def _run(args: argparse.Namespace) -> int:
    # Imported here so that `priority-kafka broker` does not load the Kafka client stack.
    from kafka import KafkaConsumer, KafkaProducer

    from priority_kafka.consumer import PriorityConsumer
    from priority_kafka.executor import ShardedExecutor

    configs: dict[str, Any] = {
        "bootstrap_servers": args.bootstrap_servers,
        "group_id": args.group_id,
        "auto_offset_reset": args.auto_offset_reset,
        **dict(item.split("=", 1) for item in args.consumer_config),
        "enable_auto_commit": False,  # the executor commits what is done, nothing else
    }
    if args.max_priority is None:
        consumer: Any = KafkaConsumer(**configs)
    else:
        consumer = PriorityConsumer(max_priority=args.max_priority, **configs)
    options: dict[str, Any] = {"failure_policy": args.failure_policy}
    if args.dead_letter_topic:
        options["dead_letter_topic"] = args.dead_letter_topic
    if args.failure_policy == "dead_letter":
        options["dead_letter_producer"] = KafkaProducer(bootstrap_servers=args.bootstrap_servers)
    executor = ShardedExecutor(
        consumer, args.handler, shards=args.shards, ordering=args.ordering, **options
    )
    executor.subscribe(args.topic)
    print(f"consuming {args.topic} with {executor!r}; SIGTERM or Ctrl-C stops", file=sys.stderr)
    try:
        executor.run(handle_signals=True)
    finally:
        if "dead_letter_producer" in options:
            options["dead_letter_producer"].close()
    print(f"stopped: {executor.stats()}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="priority-kafka", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    broker = commands.add_parser(
        "broker", help="run a single-node Apache Kafka broker on loopback in the foreground",
        description="Start a local Apache Kafka broker (KRaft) and print its bootstrap address.",
    )
    broker.add_argument(
        "--property", "-p", action="append", default=[], metavar="KEY=VALUE",
        type=_property, help="extra server.properties entry (repeatable)",
    )
    broker.add_argument("--log-dir", help="keep the broker's data here (default: a temp dir)")
    broker.set_defaults(run=_broker)

    run = commands.add_parser(
        "run", help="handle every record of topics with a ShardedExecutor until SIGTERM",
        description="Consume topics (priority topics with --max-priority) and run HANDLER on "
        "each record with key-ordered parallelism; SIGTERM/SIGINT stop gracefully.",
    )
    run.add_argument("handler", type=_handler, help="package.module:function taking a record")
    run.add_argument("--topic", "-t", action="append", required=True, help="topic (repeatable)")
    run.add_argument("--bootstrap-servers", "-b", required=True)
    run.add_argument("--group-id", "-g", required=True)
    run.add_argument(
        "--max-priority", type=int, default=None,
        help="read <topic>-0 .. <topic>-(N-1) with a PriorityConsumer (default: plain topics)",
    )
    run.add_argument("--shards", type=int, default=16, help="worker threads (default 16)")
    run.add_argument("--ordering", default="key", choices=("key", "partition", "unordered"))
    run.add_argument("--auto-offset-reset", default="earliest", choices=("earliest", "latest"))
    run.add_argument("--failure-policy", default="stop", choices=("stop", "dead_letter"))
    run.add_argument("--dead-letter-topic")
    run.add_argument(
        "--consumer-config", "-c", action="append", default=[], metavar="KEY=VALUE",
        type=_property, help="extra consumer setting, string-valued (repeatable)",
    )
    run.set_defaults(run=_run)
    return parser


def _property(text: str) -> str:
    if "=" not in text or text.startswith("="):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (got {text!r})")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``priority-kafka`` console script."""
    args = _parser().parse_args(argv)
    return int(args.run(args))
