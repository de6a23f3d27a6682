"""What every benchmark shares: arguments, the broker, preloading topics, writing results.

Each benchmark is ``python -m benchmarks.<name> [--smoke] [--out DIR] [--bootstrap-servers B]``.
It measures its baseline in the same run, prints a summary, and writes ``<name>.json`` (plus
PNGs where a plot says more) to ``--out`` (default ``benchmarks/results``). ``--smoke`` shrinks
the workload so CI can check the benchmark still runs; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from priority_kafka.testing import LocalKafkaBroker

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def parse_args(
    description: str,
    argv: Sequence[str] | None = None,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """Parse the options every benchmark takes, plus its own from ``add_arguments``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--smoke", action="store_true", help="tiny workload, for CI")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where results go")
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="use this broker instead of starting a local one",
    )
    if add_arguments is not None:
        add_arguments(parser)
    return parser.parse_args(argv)


@contextlib.contextmanager
def broker(args: argparse.Namespace) -> Iterator[str]:
    """Yield bootstrap servers: the given broker, or a local one started for this run."""
    if args.bootstrap_servers:
        yield args.bootstrap_servers
        return
    # Full JIT for the broker: benchmarks measure the client, not a cold broker.
    with LocalKafkaBroker(jvm_options=("-Xms512m", "-Xmx1g", "-XX:+UseSerialGC")) as local:
        yield local.bootstrap_servers


def unique(prefix: str) -> str:
    """A topic or group name no earlier run used."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(bootstrap_servers: str, names: Sequence[str], partitions: int = 1) -> None:
    """Create topics (one replica) and wait until their metadata is visible."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1) for name in names]
        )
    finally:
        admin.close()


def preload(
    bootstrap_servers: str, topic: str, count: int, size: int = 100, key_count: int = 0
) -> None:
    """Produce ``count`` records of ``size`` bytes to ``topic`` as fast as the client allows."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers, linger_ms=20, batch_size=256 * 1024,
        compression_type=None, acks=1,
    )
    payload = b"x" * size
    try:
        for i in range(count):
            key = str(i % key_count).encode() if key_count else None
            producer.send(topic, value=payload, key=key)
        producer.flush()
    finally:
        producer.close()


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of values, or NaN when there are none."""
    import numpy as np

    return float(np.percentile(values, q)) if len(values) else float("nan")


def write_result(name: str, result: dict[str, Any], out: Path) -> Path:
    """Print ``result`` and write it to ``<out>/<name>.json`` with the machine it ran on."""
    out.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        **result,
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    print(json.dumps(document, indent=2))
    print(f"wrote {path}")
    return path


def new_figure(rows: int = 1, cols: int = 1, **kwargs: Any) -> Any:
    """A matplotlib figure on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(rows, cols, **kwargs)


def save_figure(fig: Any, path: Path) -> None:
    """Save ``fig`` as a PNG at ``path``, creating its folder; every benchmark plot looks alike."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
