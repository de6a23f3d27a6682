"""What replication costs: a benchmark on one broker against the same on a 3-node cluster.

Each round runs every benchmark named by ``--benchmarks`` (``client_table`` and
``executor_priority``) twice, each time in a fresh process that starts its own Kafka and runs
one round of that benchmark: on one node (``--brokers 1``: one replica, producers ``acks=1``)
and on a local 3-node cluster (``--brokers 3``: 3 replicas, ``min.insync.replicas=2``,
producers ``acks=all``); one then three in even rounds, three then one in odd ones
(:func:`benchmarks._common.interleave`). Starting Kafka is not measured: each benchmark times
its own contenders, as it does alone.

Reported per benchmark: its headline figures on each side per round (``client_table``: every
contender's records/s and records per CPU-second; ``executor_priority``: the p50 and p99
produce-to-handler latency of the priority and FIFO sides on each client), the per-round
ratios cluster / node and their median, and the load average before every run.

    .venv/bin/python -m benchmarks.replication_cost [--smoke] [--rounds R]
        [--benchmarks client_table,executor_priority] [--brokers N]
"""

from __future__ import annotations

import argparse
import importlib
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import Contender, interleave, parse_args, ratio_summary, write_result

NAME = "replication_cost"


def _client_table(result: dict[str, Any]) -> dict[str, float]:
    medians = result["medians"]
    return {f"{name} {key}": value for key in ("records_per_s", "records_per_cpu_s")
            for name, value in medians[key].items()}


def _executor_priority(result: dict[str, Any]) -> dict[str, float]:
    return {f"{client} {side} {key}": figures[key]
            for client, sides in result["latency"].items()
            for side, figures in sides.items() for key in ("p50_ms", "p99_ms")}


#: Per benchmark, its headline figures from its result document (name -> value).
HEADLINES: dict[str, Callable[[dict[str, Any]], dict[str, float]]] = {
    "client_table": _client_table,
    "executor_priority": _executor_priority,
}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument(
        "--benchmarks", default=",".join(HEADLINES),
        help=f"comma-separated, of {', '.join(HEADLINES)}",
    )


def run_benchmark(name: str, brokers: int, smoke: bool, out: str) -> dict[str, Any]:
    """Contender: one round of ``benchmarks.<name>`` on a Kafka of ``brokers`` nodes of its
    own; its headline figures."""
    module = importlib.import_module(f"benchmarks.{name}")
    argv = ["--brokers", str(brokers), "--rounds", "1", "--out", out]
    result = module.main(argv + (["--smoke"] if smoke else []))
    return HEADLINES[name](result)


def compare(runs: Any, node: str, cluster: str) -> dict[str, Any]:
    """Per headline figure: each side's value per round and the ratios cluster / node."""
    figures: dict[str, Any] = {}
    for key in runs.results[node][0]:
        per_round = {side: runs.values(side, key) for side in (node, cluster)}
        figures[key] = {"per_round": per_round,
                        **ratio_summary(per_round[cluster], per_round[node])}
    return figures


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the comparison; return (and write) its result document."""
    args = parse_args(__doc__.splitlines()[0], argv, _add_arguments)
    names = [n for n in args.benchmarks.split(",") if n]
    unknown = sorted(set(names) - set(HEADLINES))
    if unknown or not names or args.rounds < 1:
        raise SystemExit(f"--benchmarks must name some of {list(HEADLINES)} (got "
                         f"{unknown or names}) and --rounds be >= 1 (got {args.rounds})")
    if args.bootstrap_servers:
        raise SystemExit("replication_cost starts its own brokers: no --bootstrap-servers")
    nodes = args.brokers if args.brokers > 1 else 3
    rounds = 1 if args.smoke else args.rounds
    result: dict[str, Any] = {"smoke": args.smoke, "cluster_brokers": nodes, "rounds": rounds,
                              "cluster": {"replication_factor": min(3, nodes),
                                          "min_insync_replicas": 2, "acks": "all"},
                              "benchmarks": {}}
    with tempfile.TemporaryDirectory(prefix="replication-cost-") as scratch:
        for name in names:
            sides = {"1 node": 1, f"{nodes} nodes": nodes}
            runs = interleave(
                [Contender(side, run_benchmark, {
                    "name": name, "brokers": brokers, "smoke": args.smoke,
                    "out": str(Path(scratch) / f"{name}-{brokers}"),
                }) for side, brokers in sides.items()],
                rounds, timeout_s=3600,  # a whole benchmark run, Kafka's start included
            )
            result["benchmarks"][name] = {
                **runs.summary(), "figures": compare(runs, *sides),
            }
    write_result(NAME, result, args.out)
    return result


if __name__ == "__main__":
    main()
