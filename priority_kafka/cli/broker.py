"""``priority-kafka broker``: a single-node Apache Kafka broker on loopback, in the foreground."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from priority_kafka.cli._common import example, key_value


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "broker", help="run a single-node Apache Kafka broker on loopback in the foreground",
        description="Start a local Apache Kafka broker (KRaft) and print its bootstrap address "
        "on stdout; Ctrl-C or SIGTERM stops it.",
        epilog=example("priority-kafka broker -p num.partitions=4 --log-dir /tmp/kafka-data"),
    )
    parser.add_argument(
        "--property", "-p", action="append", default=[], metavar="KEY=VALUE",
        type=key_value, help="extra server.properties entry (repeatable)",
    )
    parser.add_argument("--log-dir", help="keep the broker's data here (default: a temp dir)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from priority_kafka.testing import KAFKA_VERSION, LocalKafkaBroker

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
