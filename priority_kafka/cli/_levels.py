"""The levels a command reads, from the broker: discovered, or checked when ``--max-priority``
is given; missing topics fail within seconds (exit 2), or with ``--wait-for-topics`` are
waited for with a warning repeated while waiting."""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from typing import Any

from priority_kafka.cli._common import CliError, note
from priority_kafka.errors import ConfigError, MissingTopicsError
from priority_kafka.kafka_python._kafka import cluster_topics
from priority_kafka.naming import common_levels, existing_levels

#: How often ``--wait-for-topics`` looks again, and repeats its warning.
WAIT_INTERVAL_S = 5.0


def add_wait_for_topics(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait-for-topics", action="store_true",
        help="wait for missing topics to be created (a warning every 5 s) instead of failing",
    )


def _levels_of(
    topics: Sequence[str], names: set[str], max_priority: int | None, plain: bool
) -> int | None:
    """The levels ``topics`` have (checked against ``max_priority`` if given), or None for
    plain topics (``plain``: each exists as named, without level topics)."""
    if max_priority is None and plain and all(
        t in names and not existing_levels(t, names) for t in topics
    ):
        return None
    return common_levels(topics, names, max_priority, "--max-priority",
                         advice="run one command per number of levels")


def resolve_levels(
    servers: str, topics: Sequence[str], max_priority: int | None, *, wait: bool,
    admin_configs: Mapping[str, Any] | None = None, plain: bool = False,
) -> int | None:
    """The number of levels of ``topics`` on the broker, or None when ``plain`` allows plain
    topics and they are. A level above ``--max-priority`` is a CliError; missing topics are
    one too, unless ``wait``: then they are waited for, warning every ``WAIT_INTERVAL_S``."""
    while True:
        names = cluster_topics({"bootstrap_servers": servers, **(admin_configs or {})})
        try:
            return _levels_of(topics, names, max_priority, plain)
        except MissingTopicsError as exc:
            if not wait:
                raise CliError(str(exc)) from None
            note(f"warning: {exc}; waiting for them (--wait-for-topics), Ctrl-C stops")
        except ConfigError as exc:
            raise CliError(str(exc)) from None
        time.sleep(WAIT_INTERVAL_S)
