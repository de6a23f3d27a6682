"""``priority-kafka broker``: an Apache Kafka broker (or cluster) on loopback, in the foreground."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from priority_kafka.cli._common import CliError, example, key_value, note_jar_resolution, positive


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "broker", help="run an Apache Kafka broker or cluster on loopback in the foreground",
        description="Start a local Apache Kafka broker (KRaft), or a cluster of --brokers "
        "nodes, and print its bootstrap address on stdout; Ctrl-C or SIGTERM stops it.",
        epilog=example("priority-kafka broker --port 9092",
                       "priority-kafka broker -p num.partitions=4 --log-dir /tmp/kafka-data",
                       "priority-kafka broker --brokers 3"),
    )
    parser.add_argument(
        "--brokers", type=positive(int), default=1, metavar="N",
        help="nodes in the cluster (default 1: a single broker; 3 for replication factor 3)",
    )
    parser.add_argument(
        "--port", type=tcp_port, metavar="PORT",
        help="the PLAINTEXT listener's port, e.g. 9092, the address the examples of the README "
        "use (default: a free one; a single broker only)",
    )
    parser.add_argument(
        "--property", "-p", action="append", default=[], metavar="KEY=VALUE",
        type=key_value, help="extra server.properties entry (repeatable)",
    )
    parser.add_argument("--log-dir", help="keep the broker's data here (default: a temp dir)")
    parser.set_defaults(run=run)


def tcp_port(text: str) -> int:
    """argparse type: a TCP port, 1 to 65535."""
    value: int = positive(int)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port, 1 to 65535 (got {text})")
    return value


def run(args: argparse.Namespace) -> int:
    from priority_kafka.testing import KAFKA_VERSION, LocalKafkaBroker, LocalKafkaCluster

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    properties = dict(item.split("=", 1) for item in args.property)
    if args.port is not None and args.brokers != 1:
        raise CliError(f"--port {args.port} is for a single broker (got --brokers {args.brokers}).")
    note_jar_resolution()
    if args.brokers == 1:
        with LocalKafkaBroker(properties, log_dir=args.log_dir, port=args.port) as broker:
            print(broker.bootstrap_servers, flush=True)
            _running(f"pid {broker.pid}, log {broker.log_file}", KAFKA_VERSION)
            stop.wait()
        return 0
    with LocalKafkaCluster(args.brokers, properties, log_dir=args.log_dir) as cluster:
        print(cluster.bootstrap_servers, flush=True)
        nodes = ", ".join(f"node {i}: pid {cluster.broker(i).pid}, log {cluster.broker(i).log_file}"
                          for i in cluster.broker_ids)
        _running(nodes, KAFKA_VERSION)
        stop.wait()
    return 0


def _running(details: str, version: str) -> None:
    print(f"Apache Kafka {version} is running ({details}); Ctrl-C stops it.",
          file=sys.stderr, flush=True)
