"""``priority-kafka`` (also ``python -m priority_kafka``): the daily jobs around priority topics.

Commands: ``demo`` (urgent records overtake a backlog, live), ``broker`` (a local Kafka broker),
``topics create|describe|delete``, ``produce``, ``consume`` (alias ``run``), ``lag``, ``plan``
(partitions and shards for a target rate, from measured throughput) and ``bench``. Each has
``--help`` with an example. Bad input exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any

from kafka import errors as kafka_errors
from kafka.errors import KafkaConfigurationError

from priority_kafka.cli import bench, broker, consume, demo, lag, plan, produce, topics
from priority_kafka.cli._common import ArgumentParser, CliError, example, plain
from priority_kafka.kafka_python._kafka import ClusterUnreachableError, TlsHandshakeError

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
    root = parser()
    args = root.parse_args(argv)
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
        bad_input, text = _bad_input(exc), _one_line(exc)
        if bad_input:
            text = _as_flags(text, _command_parser(root, args))
        print(f"priority-kafka {args.command}: error: {text}", file=sys.stderr)
        return 2 if bad_input else 1


#: What the broker answers to a request whose values are wrong: a topic name, a partition
#: count or replication factor, a topic config, a session timeout it does not allow.
_REFUSED_VALUES = (
    kafka_errors.InvalidTopicError, kafka_errors.InvalidPartitionsError,
    kafka_errors.InvalidReplicationFactorError, kafka_errors.InvalidConfigurationError,
    kafka_errors.PolicyViolationError, kafka_errors.InvalidSessionTimeoutError,
)


def _bad_input(exc: BaseException) -> bool:
    """Whether ``exc`` says the input was bad (exit 2): ours, both clients' config errors, a
    value the broker refused, and an address that refuses every connection or a listener that
    speaks TLS to a plaintext client (``--bootstrap-servers`` or ``-c security.protocol``)."""
    if isinstance(exc, (CliError, ValueError, KafkaConfigurationError, *_REFUSED_VALUES,
                        ClusterUnreachableError, TlsHandshakeError)):
        return True
    return _invalid_arg(exc) is not None or _unreachable(exc)


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` is confluent-kafka's error for a cluster whose bootstrap addresses all
    refused, or a TLS listener reached in plaintext (raised by ``confluent._login``)."""
    confluent = sys.modules.get("confluent_kafka")
    if confluent is None or not isinstance(exc, confluent.KafkaException) or not exc.args:
        return False
    error = exc.args[0]
    return isinstance(error, confluent.KafkaError) and error.code() in (
        confluent.KafkaError._TRANSPORT, confluent.KafkaError._SSL)


def _refused(exc: BaseException) -> str | None:
    """What the broker said about a value it refused (its ``error_message``, which
    kafka-python leaves inside a request dump), else None."""
    if not isinstance(exc, _REFUSED_VALUES):
        return None
    said = re.search(r"error_message='((?:[^'\\]|\\.)*)'", str(exc))
    reason = said[1] if said else type(exc).description
    return f"the broker refused it ({type(exc).__name__}): {reason}"


def _invalid_arg(exc: BaseException) -> str | None:
    """The text of a confluent-kafka ``KafkaException`` for a bad property (librdkafka's
    ``_INVALID_ARG``), else None."""
    confluent = sys.modules.get("confluent_kafka")  # loaded if this could be one of its errors
    if confluent is None or not isinstance(exc, confluent.KafkaException) or not exc.args:
        return None
    error, invalid = exc.args[0], confluent.KafkaError._INVALID_ARG
    if isinstance(error, confluent.KafkaError) and error.code() == invalid:
        return str(error.str())
    return None


def _command_parser(root: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    """The parser of the command that ran (a ``topics`` action's, for ``topics``)."""
    chosen: Any = root
    for dest in ("command", "action"):
        subparsers = [a for a in chosen._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, dest, None)
        if not subparsers or name is None:
            break
        chosen = subparsers[0].choices[name]
    return chosen


def _as_flags(text: str, command: argparse.ArgumentParser) -> str:
    """``text`` with each setting named as the command's flag for it (``'dead_letter_topic'``
    becomes ``--dead-letter-topic``), so the message speaks the command line's language."""
    for action in command._actions:
        flags = [flag for flag in action.option_strings if flag.startswith("--")]
        if not flags:
            continue
        bare = rf"|(?<![\w.'-]){action.dest}(?![\w'])" if "_" in action.dest else ""
        text = re.sub(rf"'{action.dest}'{bare}", flags[0], text)
    return text


def _one_line(exc: BaseException) -> str:
    text = _invalid_arg(exc) or _refused(exc) or " ".join(str(exc).split()) or type(exc).__name__
    if not _bad_input(exc) and not text.startswith(type(exc).__name__):
        text = f"{type(exc).__name__}: {text}"
    elif _bad_input(exc):  # what was wrong is the message; kafka-python prefixes its class
        text = text.removeprefix(f"{type(exc).__name__}: ")
    # A note says what to do about it (consume: how to dead-letter instead of stopping).
    return "; ".join([text[:500], *getattr(exc, "__notes__", ())])
