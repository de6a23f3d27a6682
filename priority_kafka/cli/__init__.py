"""``priority-kafka`` (also ``python -m priority_kafka``): the daily jobs around priority topics.

Commands: ``demo`` (urgent records overtake a backlog, live), ``broker`` (a local Kafka broker),
``topics create|describe|delete``, ``produce``, ``consume`` (alias ``run``), ``lag``, ``plan``
(partitions and shards for a target rate, from measured throughput) and ``bench``. Each has
``--help`` with an example. Bad input exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from priority_kafka.cli import bench, broker, consume, demo, lag, plan, produce, topics
from priority_kafka.cli._common import ArgumentParser, CliError, example, plain

__all__ = ["main"]

COMMANDS = (demo, broker, topics, produce, consume, lag, plan, bench)


def parser() -> ArgumentParser:
    """The ``priority-kafka`` argument parser, every command included."""
    root = ArgumentParser(
        prog="priority-kafka", description=plain(__doc__),
        epilog=example("priority-kafka demo", "priority-kafka consume --help"),
    )
    root.add_argument("--verbose", "-v", action="store_true",
                      help="log kafka-python's warnings and show tracebacks")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                   parser_class=ArgumentParser)
    for command in COMMANDS:
        command.add_parser(commands)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``priority-kafka`` console script; returns the exit status."""
    args = parser().parse_args(argv)
    # kafka-python logs connection retries as warnings; the error that follows says it once.
    logging.basicConfig(level=logging.WARNING if args.verbose else logging.CRITICAL,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("priority-kafka: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.verbose:
            raise
        print(f"priority-kafka {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, CliError | ValueError) else 1


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, CliError | ValueError) and not text.startswith(type(exc).__name__):
        text = f"{type(exc).__name__}: {text}"
    return text[:500]
