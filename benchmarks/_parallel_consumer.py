"""Confluent's parallel-consumer as a benchmark contender: its jars, a harness, one run.

:func:`prepare` resolves ``parallel-consumer-core`` (``PC_VERSION``) and its runtime
dependencies from Maven Central through the project's Maven (``parallel_consumer/pom.xml``,
the way :mod:`priority_kafka.testing` resolves the broker's jars, into the same cache), then
compiles ``parallel_consumer/PcBench.java`` with the JDK's ``javac`` against them, cached under
``<cache>/parallel-consumer-harness-<hash>`` by the hash of the source and the classpath's jar
names. It fails with a message saying what is missing (Maven, a JDK, a dependency), never
quietly. :func:`run` starts one JVM on the harness and returns its JSON, with the count of the
``Payload size ... higher than threshold`` warnings parallel-consumer logged (its offset map
grew past what a commit may carry, and it stopped taking new records) and the first of them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["PC_VERSION", "Harness", "prepare", "run"]

#: The parallel-consumer release measured, and the kafka-clients it runs on.
PC_VERSION = "0.5.3.3"
KAFKA_CLIENTS_VERSION = "3.9.1"
# The versions parallel-consumer's parent POM declares for these.
_UNIJ_VERSION = "0.1.3"
_SLF4J_VERSION = "2.0.13"
_HERE = Path(__file__).resolve().parent / "parallel_consumer"
_MAIN = "PcBench"
#: What parallel-consumer logs when its offset map outgrows the commit metadata.
PAYLOAD_WARNING = "higher than threshold"


class HarnessError(RuntimeError):
    """parallel-consumer or its harness could not be resolved, built or run."""


Harness = tuple[str, str]
"""The harness's class directory and the jars' classpath, for :func:`run`."""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise HarnessError(f"'{name}' was not found on PATH; it is needed to build and run the "
                           "parallel-consumer harness (a JDK 17 or newer).")
    return path


def prepare() -> Harness:
    """parallel-consumer's jars and the compiled harness (resolved and built on first use)."""
    # Here, not at the top: a contender process imports this module on another commit's
    # priority_kafka (--code), which may predate maven_jars; only the parent prepares.
    from priority_kafka.testing import cache_root
    from priority_kafka.testing._jars import maven_jars

    lib = cache_root() / f"parallel-consumer-{PC_VERSION}-kafka-{KAFKA_CLIENTS_VERSION}" / "lib"
    maven_jars(
        _HERE / "pom.xml", lib,
        {"pc.version": PC_VERSION, "kafka.clients.version": KAFKA_CLIENTS_VERSION,
         "unij.version": _UNIJ_VERSION, "slf4j.version": _SLF4J_VERSION},
        f"parallel-consumer {PC_VERSION}", error=HarnessError,
    )
    jars = sorted(lib.glob("*.jar"))
    if not any(jar.name.startswith("parallel-consumer-core-") for jar in jars):
        raise HarnessError(f"{lib} holds no parallel-consumer-core jar: remove it to resolve "
                           "again.")
    classpath = ":".join(str(jar) for jar in jars)
    source = (_HERE / f"{_MAIN}.java").read_bytes()
    digest = hashlib.sha256(source + classpath.encode()).hexdigest()[:16]
    classes = cache_root() / f"parallel-consumer-harness-{digest}"
    if not (classes / f"{_MAIN}.class").is_file():
        classes.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="harness-", dir=classes.parent))
        done = subprocess.run(
            [_tool("javac"), "-d", str(staging), "-cp", classpath, str(_HERE / f"{_MAIN}.java")],
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise HarnessError(f"javac could not build {_MAIN}.java:\n{done.stderr.strip()}")
        try:
            staging.rename(classes)
        except OSError:  # another process built it first
            shutil.rmtree(staging, ignore_errors=True)
    return str(classes), classpath


def run(
    harness: Harness, bootstrap_servers: str, topic: str, group: str, records: int,
    concurrency: int, ordering: str, sleep_ms: int, timeout_s: float, stall_s: float,
) -> dict[str, Any]:
    """One parallel-consumer run to ``records`` records (or ``stall_s`` without one): the
    harness's JSON plus ``payload_warnings`` and ``payload_warning`` (the first, or None).
    ``ordering`` is ``"key"``, ``"unordered"`` or ``"partition"``."""
    classes, classpath = harness
    command = [
        _tool("java"), "-XX:+UseSerialGC", "-Xmx512m",
        # Warnings and errors only: its INFO lines (and kafka-clients') would be most of stderr.
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", f"{classes}:{classpath}", _MAIN, bootstrap_servers, topic, group, str(records),
        str(concurrency), ordering.upper(), str(sleep_ms), str(timeout_s), str(stall_s),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=timeout_s + 60)
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"parallel-consumer did not end within {timeout_s + 60:g} s") from exc
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.strip().splitlines()[-40:])
        raise HarnessError(f"parallel-consumer's run failed (exit {done.returncode}):\n{tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    warnings = [line for line in done.stderr.splitlines() if PAYLOAD_WARNING in line]
    result["payload_warnings"] = len(warnings)
    result["payload_warning"] = warnings[0].strip() if warnings else None
    return result
