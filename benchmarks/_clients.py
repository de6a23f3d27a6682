"""The client axis: ``--client kafka-python|confluent|both`` on every benchmark that runs on
either client family.

:func:`add_client_argument` adds the option (default ``both``), :func:`clients_of` reads it;
with both, each contender runs once per family in the same interleaved run
(:func:`interleave_clients`: contenders named ``<client>/<side>``), and :func:`client_ratios`
gives the per-round ratios confluent / kafka-python.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from benchmarks._code import family, registry
from benchmarks._common import Contender, Interleaved, interleave, ratio_summary

#: The client families these benchmarks run on: the registry's that are synchronous and have
#: exactly-once (the executor benchmarks build their consumers synchronously, and exactly-once
#: producers; benchmarks/client_table.py measures the others). The first is the baseline of
#: the ratios between them.
CLIENTS: tuple[str, ...] = tuple(
    name for name in registry().NAMES if family(name).can("synchronous", "exactly_once")
)


def plot_name(stem: str, client: str) -> str:
    """A benchmark's plot file for ``client``: ``<stem>.png`` for the baseline family (the name
    the docs have always shown), ``<client>_<stem>.png`` for another."""
    return f"{stem}.png" if client == CLIENTS[0] else f"{client}_{stem}.png"


def add_client_argument(parser: argparse.ArgumentParser) -> None:
    """``--client <family>|both`` (default both)."""
    parser.add_argument(
        "--client", choices=(*CLIENTS, "both"), default="both",
        help="client family to run on; both: interleaved in the same run",
    )


def clients_of(args: argparse.Namespace) -> list[str]:
    """The client families ``--client`` chose."""
    return list(CLIENTS) if args.client == "both" else [args.client]


def check_client(client: str) -> None:
    """Refuse a client family that is not one of :data:`CLIENTS`, naming it."""
    if client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}; one of {CLIENTS}")


def per_client(
    clients: Sequence[str], name: str, function: Callable[..., dict[str, Any]],
    kwargs: dict[str, Any],
) -> list[Contender]:
    """One contender ``<client>/<name>`` per client, ``function(client=<client>, **kwargs)``,
    next to each other (so they take turns within a round)."""
    return [
        Contender(f"{client}/{name}", function, {**kwargs, "client": client}) for client in clients
    ]


def interleave_clients(
    function: Callable[..., dict[str, Any]], sides: Sequence[str], clients: Sequence[str],
    rounds: int, **kwargs: Any,
) -> Interleaved:
    """:func:`interleave` ``function(client=, side=, **kwargs)`` for every side on every client,
    named ``<client>/<side>``."""
    contenders = [
        contender for side in sides
        for contender in per_client(clients, side, function, {**kwargs, "side": side})
    ]
    return interleave(contenders, rounds)


def client_ratios(
    runs: Interleaved, clients: Sequence[str], names: Iterable[str], key: str
) -> dict[str, Any]:
    """Per ``name``: each client's per-round ``key`` and median, and with both clients the
    per-round ratios confluent / kafka-python (:func:`ratio_summary`)."""
    compared: dict[str, Any] = {}
    for name in names:
        values = {client: runs.values(f"{client}/{name}", key) for client in clients}
        entry: dict[str, Any] = {
            "per_round": values,
            "medians": {client: statistics.median(v) for client, v in values.items()},
        }
        if len(clients) == len(CLIENTS):
            baseline, other = CLIENTS[0], CLIENTS[1]
            entry[f"{other}_over_{baseline}".replace("-", "_")] = ratio_summary(
                values[other], values[baseline]
            )
        compared[name] = entry
    return compared
