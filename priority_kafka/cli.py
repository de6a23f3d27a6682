"""``priority-kafka`` (also ``python -m priority_kafka``): run a local broker for development."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

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
    return parser


def _property(text: str) -> str:
    if "=" not in text or text.startswith("="):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (got {text!r})")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``priority-kafka`` console script."""
    args = _parser().parse_args(argv)
    return int(args.run(args))
