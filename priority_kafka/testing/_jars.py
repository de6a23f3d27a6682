"""The Apache Kafka release the local brokers run, and its jars resolved from Maven Central."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path

from priority_kafka.errors import BrokerStartError

#: The Apache Kafka release the local broker runs. Pinned here and nowhere else.
KAFKA_VERSION = "4.4.0"
# Kafka 4.0-4.4 log through slf4j 1.7.36 (kafka_2.13's pom), so the binding stays
# log4j-slf4j-impl; 2.25.5 is the log4j2 release kafka-server 4.4.0 depends on.
_LOG4J_VERSION = "2.25.5"
_LOG_TAIL_LINES = 40


def cache_root() -> Path:
    """Where downloaded artifacts (the broker's jars) are kept: ``$PRIORITY_KAFKA_CACHE``, or
    ``$XDG_CACHE_HOME/priority_kafka`` (``~/.cache/priority_kafka``)."""
    configured = os.environ.get("PRIORITY_KAFKA_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "priority_kafka"


def _require_tool(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BrokerStartError(f"'{name}' was not found on PATH; it is needed {why}.")
    return path


def _lib_dir(cache_dir: str | os.PathLike[str] | None) -> Path:
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    return root / f"kafka-{KAFKA_VERSION}" / "lib"


def cached_broker_jars(cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The directory of the broker's jars if they are resolved already, else None (then
    :func:`broker_jars` runs Maven: a first run's progress messages say so only then)."""
    lib = _lib_dir(cache_dir)
    return lib if lib.is_dir() and any(lib.glob("kafka_2.13-*.jar")) else None


def broker_jars(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the directory holding the broker's jars, resolving them with Maven if absent.

    The jars land in ``<cache>/kafka-<version>/lib`` (``$PRIORITY_KAFKA_CACHE`` or
    ``~/.cache/priority_kafka`` by default). Resolution writes to a temporary directory that is
    renamed into place only when complete, so an interrupted run never leaves half a classpath.
    """
    lib = _lib_dir(cache_dir)
    if cached_broker_jars(cache_dir) is not None:
        return lib
    with resources.as_file(resources.files("priority_kafka") / "broker-pom.xml") as pom:
        maven_jars(
            pom, lib, {"kafka.version": KAFKA_VERSION, "log4j.version": _LOG4J_VERSION},
            f"Apache Kafka {KAFKA_VERSION}",
        )
    return lib


def maven_jars(
    pom: Path, lib: Path, properties: Mapping[str, str], what: str,
    error: Callable[[str], Exception] = BrokerStartError,
) -> None:
    """Copy the runtime dependencies of ``pom`` (its ``${...}`` set from ``properties``) from
    Maven Central into ``lib`` unless it exists; ``error(message)`` is raised, naming ``what``
    and the end of Maven's output, when Maven fails. Written to a temporary directory renamed
    into place when complete, so an interrupted run never leaves half a classpath."""
    if lib.is_dir():
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise error(f"'mvn' was not found on PATH; it is needed to resolve {what} from Maven "
                    "Central.")
    lib.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="lib-", dir=lib.parent))
    command = [
        mvn, "--batch-mode", "--quiet", "-f", str(pom),
        *(f"-D{name}={value}" for name, value in properties.items()),
        # 3.8.1, not the plugin Maven picks: an old one walks the test scope of the
        # dependencies' parents too (parallel-consumer's reaches artifacts not on Central).
        "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
        "-DincludeScope=runtime", f"-DoutputDirectory={staging}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        output = (done.stdout + done.stderr).strip().splitlines()[-_LOG_TAIL_LINES:]
        raise error(
            f"Maven could not resolve {what} from Maven Central "
            f"(exit {done.returncode}):\n" + "\n".join(output)
        )
    try:
        staging.rename(lib)
    except OSError:
        # Another process resolved the same jars first; theirs are as good as ours.
        shutil.rmtree(staging, ignore_errors=True)
