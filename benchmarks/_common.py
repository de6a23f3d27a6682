"""What every benchmark shares: arguments, the broker, preloading topics, rates, writing results.

Each benchmark is ``python -m benchmarks.<name> [--smoke] [--out DIR] [--bootstrap-servers B]
[--brokers N]``.
It measures its baseline in the same run, prints a summary, and writes ``<name>.json`` (plus
PNGs where a plot says more) to ``--out`` (default ``benchmarks/results``). ``--smoke`` shrinks
the workload so CI can check the benchmark still runs; its numbers mean nothing.

Contenders are compared with :func:`interleave`: every run of every contender is a fresh
process, the contenders take turns within each round, and the JSON carries each round's values,
the per-round ratios and the load average before every run, because the machine is shared.
``--code NAME=PATH`` runs every contender on another checkout's priority_kafka too, in the same
interleaved run (:mod:`benchmarks._code`): a before/after comparison with today's harness.

``--brokers 3`` runs the benchmark on a local 3-node cluster instead of one broker; the topics
the harness creates (:func:`create_topics`, :func:`create_level_topics`, :func:`preloaded_levels`)
then have 3 replicas and ``min.insync.replicas=2``, and its producers send with ``acks=all``
(:func:`replication` reads this from the cluster itself, so ``--bootstrap-servers`` of a real
cluster gets the same). ``benchmarks.replication_cost`` compares a benchmark on one node and on
three, interleaved.

The harness imports kafka-python only inside the functions that use it: a contender process
imports its benchmark's module, and one that runs confluent-kafka must not carry kafka-python's
13 MB (``benchmarks.executor_memory`` measures that process).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import functools
import importlib
import json
import multiprocessing
import os
import platform
import signal
import statistics
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import attrs

from benchmarks import _code

RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: The key of a failed run's result (:func:`interleave`): its error, and no figures.
FAILED = "failed"


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
    parser.add_argument(
        "--brokers", type=_node_count, default=1, metavar="N",
        help="start a local cluster of N nodes instead of one broker (replication factor "
             "min(N, 3), min ISR 2, producers acks=all)",
    )
    _code.add_code_argument(parser)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    _code.use(args.code)
    return args


def _node_count(text: str) -> int:
    count = int(text)
    if not 1 <= count <= 9:
        raise argparse.ArgumentTypeError(f"--brokers must be 1 to 9 (got {text!r})")
    return count


@contextlib.contextmanager
def broker(args: argparse.Namespace) -> Iterator[str]:
    """Yield bootstrap servers: the given broker, or a local one (``--brokers`` > 1: a local
    cluster) started for this run."""
    if args.bootstrap_servers:
        yield args.bootstrap_servers
        return
    # Here, not at the top: contenders import this module on another commit's priority_kafka
    # (--code), which may predate LocalKafkaCluster.
    from priority_kafka.testing import LocalKafkaBroker, LocalKafkaCluster

    # Full JIT for the broker: benchmarks measure the client, not a cold broker.
    if getattr(args, "brokers", 1) > 1:
        # Each node a smaller heap than a lone broker: several share the machine.
        with LocalKafkaCluster(
            args.brokers, jvm_options=("-Xms256m", "-Xmx512m", "-XX:+UseSerialGC")
        ) as cluster:
            warm_group_coordinator(cluster.bootstrap_servers)
            yield cluster.bootstrap_servers
        return
    with LocalKafkaBroker(jvm_options=("-Xms512m", "-Xmx1g", "-XX:+UseSerialGC")) as local:
        warm_group_coordinator(local.bootstrap_servers)
        yield local.bootstrap_servers


def warm_group_coordinator(bootstrap_servers: str) -> None:
    """Have a new broker create and load its group-offsets topic now. The first group to look
    for its coordinator waits for that (1 s here, and 3 s for a PriorityConsumer's levels
    joining at once), and the wait fell on whichever contender read first: the same code read
    1M records at 0.26 of its own rate in the first round of `consumer_overhead`, 1.08-1.11 in
    the others."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "warm-up"})
    deadline = time.monotonic() + 60
    try:
        while True:
            try:  # NOT_COORDINATOR while the topic loads: librdkafka gives up, we ask again
                consumer.committed([TopicPartition("warm-up", 0)], timeout=10)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()


@attrs.frozen
class Replication:
    """How the harness writes to a broker or cluster of ``brokers`` nodes: topics with
    ``replication_factor`` replicas (3 at most) and ``min_insync_replicas`` (2 once there are
    3 replicas), producers with ``acks`` ("all" when replicated, else 1: the same on one node)."""

    brokers: int

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)

    @property
    def min_insync_replicas(self) -> int:
        return 2 if self.replication_factor >= 3 else 1

    @property
    def acks(self) -> int | str:
        return "all" if self.replication_factor > 1 else 1

    def topic_settings(self) -> dict[str, int]:
        """``create_priority_topics`` keyword arguments (none on one node, the defaults: a
        commit's priority_kafka from before min_insync_replicas runs there under --code)."""
        if self.brokers == 1:
            return {}
        return {"replication_factor": self.replication_factor,
                "min_insync_replicas": self.min_insync_replicas}


@functools.cache
def replication(bootstrap_servers: str) -> Replication:
    """The :class:`Replication` for the cluster at ``bootstrap_servers`` (its node count,
    asked once per process)."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        return Replication(len(admin.describe_cluster()["brokers"]))
    finally:
        admin.close()


def create_level_topics(bootstrap_servers: str, topic: str, levels: int) -> list[str]:
    """``create_priority_topics`` with the cluster's :func:`replication`."""
    from priority_kafka import create_priority_topics

    return create_priority_topics(
        bootstrap_servers, topic, levels, **replication(bootstrap_servers).topic_settings()
    )


def unique(prefix: str) -> str:
    """A topic or group name no earlier run used."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str,
               step_s: float = 0.005) -> None:
    """Return once ``condition()`` is true, checking every ``step_s``; TimeoutError naming
    ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout_s:g} s")
        time.sleep(step_s)


def create_topics(bootstrap_servers: str, names: Sequence[str], partitions: int = 1) -> None:
    """Create topics (with the cluster's :func:`replication`)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    settings = replication(bootstrap_servers)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_topics([
            NewTopic(name, num_partitions=partitions,
                     replication_factor=settings.replication_factor,
                     topic_configs={"min.insync.replicas": str(settings.min_insync_replicas)})
            for name in names
        ])
    finally:
        admin.close()


def preload(
    bootstrap_servers: str,
    topics: str | Sequence[str],
    count: int,
    size: int = 100,
    key_count: int = 0,
) -> None:
    """Produce ``count`` records of ``size`` bytes to each of ``topics`` (a name or several),
    keyed ``0 .. key_count - 1`` in turn when ``key_count``, as fast as the client allows.

    Every benchmark preloads through here, with librdkafka (the ``[dev]`` extra installs
    confluent-kafka): the fastest producer at hand, and setup is not what is measured. Keys go to
    the partitions Java's and kafka-python's partitioner choose (murmur2), so a keyed topic is
    laid out as a kafka-python producer would lay it out.
    """
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap_servers, "linger.ms": 20,
        "acks": replication(bootstrap_servers).acks,
        "partitioner": "murmur2_random",
    })
    payload = b"x" * size
    for topic in [topics] if isinstance(topics, str) else topics:
        for i in range(count):
            key = str(i % key_count).encode() if key_count else None
            while True:
                try:
                    producer.produce(topic, payload, key)
                    break
                except BufferError:  # librdkafka's queue is full: let deliveries drain it
                    producer.poll(0.05)
    producer.flush()


@attrs.frozen
class Preloaded:
    """Priority topics holding the same number of records per level, and where they are."""

    servers: str
    topic: str
    topics: list[str]
    total: int


@contextlib.contextmanager
def preloaded_levels(
    args: argparse.Namespace, prefix: str, levels: int, size: int = 100
) -> Iterator[Preloaded]:
    """The broker of ``args`` with a new logical topic of ``levels`` levels sharing
    ``args.records`` (3,000 with ``--smoke``) records of ``size`` bytes evenly."""
    per_level = (3_000 if args.smoke else args.records) // levels
    topic = unique(prefix)
    with broker(args) as servers:
        topics = create_level_topics(servers, topic, levels)
        preload(servers, topics, per_level, size)
        yield Preloaded(servers, topic, topics, per_level * levels)


def timed(records: int, start_wall: float, start_cpu: float) -> dict[str, float]:
    """Records, wall and CPU seconds since ``start_wall``/``start_cpu``, and both rates
    (``cpu_s`` is the process CPU time: every thread, a client library's included)."""
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    return {
        "records": records,
        "wall_s": wall,
        "cpu_s": cpu,
        "records_per_s": records / wall,
        "records_per_cpu_s": records / cpu,
    }


@attrs.frozen
class Contender:
    """One side of a comparison: ``function(**kwargs)``, run in a fresh process.

    ``function`` is a module-level function returning a JSON-able dict; ``kwargs`` must pickle.
    """

    name: str
    function: Callable[..., dict[str, Any]]
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)


def _function_path(function: Callable[..., Any]) -> str:
    """``module:qualname`` of a module-level function; a ``python -m`` script by its real name."""
    module = function.__module__
    if module == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        if spec is None:
            raise ValueError(f"{function.__qualname__} must live in an importable module")
        module = spec.name
    return f"{module}:{function.__qualname__}"


def _run_contender(
    connection: Connection, path: str, kwargs: Mapping[str, Any], package_dir: str | None = None
) -> None:
    """Child process: call the function at ``path`` and send back ("ok", result) or the error;
    with ``package_dir``, only once priority_kafka is known to come from there."""
    # A contender the parent gives up on is terminated: its threads' stacks go to stderr first,
    # so a run that hung says where.
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    module, _, name = path.partition(":")
    try:
        _code.check_loaded(package_dir)
        result = getattr(importlib.import_module(module), name)(**kwargs)
        connection.send(("ok", result))
    except BaseException:  # the parent re-raises it with the contender's name
        connection.send(("error", traceback.format_exc()))
    finally:
        connection.close()


#: Watches a contender's process from outside: called with its pid once it started, it returns
#: a function that the parent calls once the process ended, whose dict joins the result.
Monitor = Callable[[int], Callable[[], Mapping[str, Any]]]


def run_fresh(
    contender: Contender, timeout_s: float, monitor: Monitor | None = None,
    code: _code.Code = _code.CURRENT,
) -> dict[str, Any]:
    """Run ``contender`` once in a new (spawned) process, on ``code``'s priority_kafka; its
    result (with ``monitor``'s, if given), or its error re-raised."""
    # spawn, not fork: the parent may run kafka-python IO threads, and nothing must carry over.
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    package_dir = None if code.package_dir is None else str(code.package_dir)
    process = context.Process(
        target=_run_contender,
        args=(send, _function_path(contender.function), dict(contender.kwargs), package_dir),
        name=f"contender-{contender.name}",
    )
    with code.importable():
        process.start()
    send.close()
    watched = monitor(process.pid) if monitor is not None else None
    try:
        if not receive.poll(timeout_s):
            raise TimeoutError(f"contender {contender.name!r} gave no result in {timeout_s:g} s")
        status, payload = receive.recv()
    except EOFError:
        status, payload = "error", "the process ended without a result"
    finally:
        receive.close()
        process.join(10)
        if process.is_alive():
            process.terminate()
            process.join()
        seen = watched() if watched is not None else {}
    if status != "ok":
        raise RuntimeError(f"contender {contender.name!r} failed:\n{payload}")
    return {**payload, **seen}


def ratio_summary(numerators: Sequence[float], denominators: Sequence[float]) -> dict[str, Any]:
    """Per-round ratios and their median, min and max."""
    ratios = [n / d for n, d in zip(numerators, denominators, strict=True)]
    return {
        "ratio": statistics.median(ratios),
        "ratio_per_round": ratios,
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


@attrs.frozen
class Interleaved:
    """The results of :func:`interleave`: per contender, one result dict per round."""

    #: The contenders' order in each round.
    order: list[list[str]]
    results: dict[str, list[dict[str, Any]]]
    #: Per contender and round, ``os.getloadavg()`` (1, 5, 15 minutes) just before its run.
    load_averages: dict[str, list[list[float]]]

    def values(self, name: str, key: str) -> list[Any]:
        """``key`` of ``name``'s result, one per round it completed (a failed round has none:
        :attr:`failures`)."""
        return [result[key] for result in self.results[name] if FAILED not in result]

    def pooled(self, name: str, key: str) -> list[Any]:
        """The lists under ``key`` of ``name``'s results, every completed round's joined."""
        return [
            item for result in self.results[name] if FAILED not in result for item in result[key]
        ]

    def paired(self, key: str, *names: str) -> list[list[Any]]:
        """``key`` of each of ``names``, one list each, over the rounds that all of them
        completed: the same rounds in each, for per-round ratios."""
        rounds = zip(*(self.results[name] for name in names), strict=True)
        kept = [results for results in rounds if all(FAILED not in r for r in results)]
        return [[results[i][key] for results in kept] for i in range(len(names))]

    @property
    def failures(self) -> dict[str, list[dict[str, Any]]]:
        """Per contender with a failed run: each such round (from 1) and its error."""
        found: dict[str, list[dict[str, Any]]] = {}
        for name, results in self.results.items():
            for round_, result in enumerate(results, 1):
                if FAILED in result:
                    found.setdefault(name, []).append({"round": round_, "error": result[FAILED]})
        return found

    def compare(self, key: str, subject: str, baseline: str) -> dict[str, Any]:
        """Both contenders' per-round ``key`` values and the ratios subject / baseline (over
        the rounds both completed)."""
        values = dict(zip((subject, baseline), self.paired(key, subject, baseline), strict=True))
        if not values[subject]:
            return {"per_round": values, "failed": "no round completed by both"}
        return {
            "per_round": values,
            "medians": {name: statistics.median(v) for name, v in values.items()},
            **ratio_summary(values[subject], values[baseline]),
        }

    def summary(self) -> dict[str, Any]:
        """How the runs were interleaved, the load average before each, and the runs that
        failed (for the JSON)."""
        return {
            "rounds": len(self.order),
            "order_per_round": self.order,
            "process_per_run": "fresh (multiprocessing spawn)",
            "load_average_before_run": self.load_averages,
            "failed_runs": self.failures,
        }


def interleave(
    contenders: Sequence[Contender], rounds: int, timeout_s: float = 900.0,
    monitor: Monitor | None = None,
) -> Interleaved:
    """Run every contender once per round, each run in a fresh process, taking turns.

    Round 0 runs the contenders in the given order, round 1 in reverse, and so on (A B, B A,
    A B, ...), so neither side always runs first, or always right after the other; the load
    average is read before every run. ``monitor`` watches every run's process from outside
    (see :data:`Monitor`). With ``--code``, each contender runs on every code version in turn
    (A@current A@old B@current B@old, then reversed); the result holds the ``current`` runs,
    and :mod:`benchmarks._code` keeps every version's for the JSON. A run that fails (raises,
    or gives no result within ``timeout_s``) is recorded as ``{FAILED: error}`` for that round
    and printed, and the rounds go on: :meth:`Interleaved.values` leaves it out,
    :meth:`Interleaved.paired` and :meth:`Interleaved.compare` pair only rounds both
    contenders completed, and :meth:`Interleaved.summary` lists it (``failed_runs``).
    """
    names = [contender.name for contender in contenders]
    if len(set(names)) != len(names) or rounds < 1:
        raise ValueError(f"contenders need distinct names and rounds >= 1 (got {names}, {rounds})")
    codes = _code.versions()
    order: list[list[str]] = []
    every_order: list[list[str]] = []
    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        code.name: {name: [] for name in names} for code in codes
    }
    loads: dict[str, dict[str, list[list[float]]]] = {
        code.name: {name: [] for name in names} for code in codes
    }
    for round_ in range(rounds):
        forward = round_ % 2 == 0
        turn = list(contenders) if forward else list(contenders)[::-1]
        order.append([contender.name for contender in turn])
        every_order.append([])
        for contender in turn:
            for code in codes if forward else codes[::-1]:
                label = contender.name if len(codes) == 1 else f"{contender.name}@{code.name}"
                every_order[-1].append(label)
                loads[code.name][contender.name].append([round(x, 2) for x in os.getloadavg()])
                results[code.name][contender.name].append(
                    _run_or_failure(contender, timeout_s, monitor, code, round_, rounds, label)
                )
    current = _code.CURRENT.name
    _code.record(results, {
        "rounds": rounds, "order_per_round": every_order,
        "process_per_run": "fresh (multiprocessing spawn)", "load_average_before_run": loads,
    })
    return Interleaved(order, results[current], loads[current])


def _run_or_failure(
    contender: Contender, timeout_s: float, monitor: Monitor | None, code: _code.Code,
    round_: int, rounds: int, label: str,
) -> dict[str, Any]:
    """One run's result, or ``{FAILED: error}``: one contender failing (a harness that did not
    close in time under load) is that round's recorded failure, not the end of every other
    contender's figures."""
    try:
        result = run_fresh(contender, timeout_s, monitor, code)
    except (RuntimeError, TimeoutError) as error:
        print(f"round {round_ + 1}/{rounds} {label}: FAILED ({_last_line(error)})", flush=True)
        return {FAILED: str(error)}
    print(f"round {round_ + 1}/{rounds} {label}: done", flush=True)
    return result


def _last_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[-1] if lines else type(error).__name__


def interleave_sides(
    function: Callable[..., dict[str, Any]], sides: Sequence[str], rounds: int, **kwargs: Any
) -> Interleaved:
    """:func:`interleave` the contenders ``function(side=<side>, **kwargs)``, named by side."""
    return interleave(
        [Contender(side, function, {**kwargs, "side": side}) for side in sides], rounds
    )


def compare_rates(
    runs: Interleaved, subject: str, baseline: str,
    keys: Sequence[str] = ("records_per_s", "records_per_cpu_s"),
) -> dict[str, Any]:
    """How the runs were interleaved, and per-round values and ratios subject / baseline of
    each rate in ``keys``."""
    return {**runs.summary(), **{key: runs.compare(key, subject, baseline) for key in keys}}


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
    code = _code.comparison()
    if code is not None:
        document["code"] = code
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
