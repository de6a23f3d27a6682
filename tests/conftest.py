"""Shared fixtures: one real Apache Kafka broker for the whole session (priority_kafka.testing)
and, for the tests that use Spark, one SparkSession; and the session-end check that nothing
outlives the suite."""

import faulthandler
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from hypothesis import HealthCheck, settings

from priority_kafka.families import FAMILIES, Family, having

# Hypothesis's per-example deadline (200 ms) and its too_slow check time the machine, not the
# property: on two shared cores beside brokers and JVMs a pure example can take longer (seen:
# tests/test_scheduling.py under load). A test that bounds a case's time says so itself
# (tests/test_bad_input.py); pytest-timeout bounds every test.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

pytest_plugins = ["priority_kafka.pytest_plugin"]


@pytest.fixture(params=FAMILIES, ids=lambda one: one.name)
def family(request: pytest.FixtureRequest) -> Family:
    """Each client family of the registry in turn (a test over both families takes this
    instead of listing them)."""
    one: Family = request.param
    return one


def pytest_addoption(parser):
    group = parser.getgroup("faults", "the fault suite (tests/faults, docs/reliability.md)")
    group.addoption(
        "--faults-full", action="store_true", default=False,
        help="run the fault scenarios at full size (also PRIORITY_KAFKA_FAULTS_FULL=1); "
             "the default is the reduced size the normal suite runs",
    )
    group.addoption(
        "--faults-json", default=None, metavar="PATH",
        help="append each fault scenario's figures to this JSON file "
             "(also PRIORITY_KAFKA_FAULTS_JSON)",
    )


# tryfirst: pytest-xdist reads the groups in its own pytest_collection_modifyitems (it appends
# them to the node ids); pytest_xdist_node_collection_finished checks that it did.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups for ``--dist loadgroup`` (scripts/dev.sh runs several workers): a module's tests stay
    on one worker, so its module fixtures (brokers with SASL, proxies) start once; every test
    on the session's SparkSession runs on one worker, which starts one Spark JVM, and every
    test on the 3-node cluster on one worker, which starts one cluster. The Spark group goes
    first: the longest, around which the other worker balances the rest."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "spark" in fixtures:
            group = "spark-session"
        elif "kafka_cluster" in fixtures:  # one 3-node cluster per worker is three JVMs
            group = "kafka-cluster"
        else:
            group = item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: "spark" not in getattr(item, "fixturenames", ()))


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """With ``--dist loadgroup``, stop unless the groups took (pytest-xdist appends each test's
    group to its node id): with pytest 9.2 and pytest-xdist 3.8 they are silently ignored
    (pytest-xdist#1386), and every worker that draws a Spark or cluster test starts its own
    JVMs."""
    if node.config.getvalue("dist") == "loadgroup" and any("@" not in id_ for id_ in ids):
        pytest.exit(
            f"pytest-xdist ignored the tests' groups (--dist loadgroup) under pytest "
            f"{pytest.__version__} (pytest-xdist#1386): install the pytest that setup.cfg names",
            returncode=3,
        )


# How long past its pytest-timeout a test may run before the worker is ended.
_HARD_TIMEOUT_GRACE_S = 60


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A hang pytest-timeout cannot end becomes a failure: its signal interrupts Python, not a
    main thread blocked in C (a librdkafka close, a native wait), so ``_HARD_TIMEOUT_GRACE_S``
    after a test's timeout faulthandler prints every thread's stack and ends the worker, which
    pytest-xdist reports as a crash of that test."""
    marker = item.get_closest_marker("timeout")
    limit = marker.args[0] if marker is not None and marker.args else item.config.getini("timeout")
    faulthandler.dump_traceback_later(
        float(limit) + _HARD_TIMEOUT_GRACE_S, exit=True, file=sys.__stderr__
    )
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local[2] SparkSession with the ``priority_kafka`` format registered; stopped at the end."""
    from pyspark.sql import SparkSession

    from priority_kafka.spark import register

    # The data source runs in Python workers, which must use this interpreter and its venv;
    # Spark reads that from the environment when it starts a worker.
    environment = pytest.MonkeyPatch()
    environment.setenv("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("priority-kafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
        stop_spark_gateway()
        environment.undo()


def stop_spark_gateway() -> None:
    """Stop the JVM PySpark launched: SparkSession.stop() leaves it running until the
    interpreter exits, and the session-end check counts it as left behind."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    process = getattr(gateway, "proc", None)
    if process is not None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None


# How long the session-end check lets threads and processes of the last test finish closing.
_LEFTOVER_GRACE_S = 10.0
_leftovers: list[str] = []


def _leftover_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate()
            if thread is not threading.main_thread() and not thread.daemon and thread.is_alive()]


def _leftover_processes() -> list[psutil.Process]:
    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            # multiprocessing's resource tracker is the interpreter's own helper: it lives as
            # long as the interpreter by design and exits with it.
            if child.status() != psutil.STATUS_ZOMBIE and \
                    "multiprocessing.resource_tracker" not in " ".join(child.cmdline()):
                alive.append(child)
        except psutil.NoSuchProcess:
            pass
    return alive


def _find_leftovers() -> list[str]:
    """What outlives this process's tests, after a grace period; child processes are killed."""
    found = []
    deadline = time.monotonic() + _LEFTOVER_GRACE_S
    for thread in _leftover_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    psutil.wait_procs(_leftover_processes(), timeout=max(0.0, deadline - time.monotonic()))
    for thread in _leftover_threads():
        found.append(f"thread {thread.name!r} ({type(thread).__name__}, target "
                     f"{getattr(thread, '_target', None)!r})")
    for child in _leftover_processes():
        try:
            found.append(f"process {child.pid}: {' '.join(child.cmdline())[:200]}")
            child.kill()
        except psutil.NoSuchProcess:
            continue
    return found


def _is_xdist_controller(config: pytest.Config) -> bool:
    return config.pluginmanager.hasplugin("dsession")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run, naming them, when non-daemon threads (which would hang the interpreter's
    exit) or child processes (brokers, Spark's JVM, workers) outlive the suite.

    Under xdist each worker looks at its own process and sends what it found to the
    controller (whose own children are the workers), which reports it and fails the run."""
    config = session.config
    if _is_xdist_controller(config):
        found = _leftovers
    else:
        found = _find_leftovers()
        _leftovers.extend(found)
        if hasattr(config, "workeroutput"):
            config.workeroutput["leftovers"] = found
            return
    if found:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        lines = ["left behind by the suite (a leak to fix):", *(f"  {x}" for x in found)]
        if reporter is not None:
            reporter.section("leftovers", sep="=", red=True, bold=True)
            for line in lines:
                reporter.write_line(line)
        else:
            print("\n".join(lines), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """(xdist controller) Collect what a worker found left behind."""
    output = getattr(node, "workeroutput", None) or {}
    _leftovers.extend(f"[{node.gateway.id}] {item}" for item in output.get("leftovers", ()))


def pytest_unconfigure(config: pytest.Config) -> None:
    # A non-daemon thread left behind would keep the interpreter from exiting: the run has
    # failed and said why, so end it rather than hang.
    if not _is_xdist_controller(config) and _leftovers and _leftover_threads():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(pytest.ExitCode.TESTS_FAILED))


def over_families(*capabilities: str, argname: str = "family") -> pytest.MarkDecorator:
    """Parametrize ``argname`` over the registry's families that have every one of
    ``capabilities`` (:meth:`~priority_kafka.families.Family.can`), with their names as the
    test ids: the :class:`Family` itself for ``family`` (the fixture of that name, filtered),
    its name for another argname (a test that hands the name on, as ``--client`` takes it)."""
    chosen = having(*capabilities)
    values = chosen if argname == "family" else tuple(one.name for one in chosen)
    return pytest.mark.parametrize(argname, values, ids=[one.name for one in chosen])


def names_having(*capabilities: str) -> tuple[str, ...]:
    """The names of the families with every one of ``capabilities``, for a fixture's params."""
    return tuple(one.name for one in having(*capabilities))
