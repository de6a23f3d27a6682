"""The pure core modules load no Kafka client, threads, clocks, sockets, event loop or Spark."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

import priority_kafka

PURE_MODULES = [
    "naming", "distributors", "burst", "budgets", "_levels", "offsets", "prefetch", "sharding",
    "scheduling",
    "kafka_python.consumer._polling", "kafka_python.consumer._delivered", "spark.ranges",
    "spark.admission", "added", "offset_map", "commit_plan", "record_size", "executor._bytes",
]
# Packages whose __init__ is an edge (a Kafka-facing facade) over pure modules: the probe stubs
# them like the top-level package, so only the pure module and what it imports load.
EDGE_PACKAGES = ["kafka_python.consumer", "executor"]
FORBIDDEN = {"kafka", "threading", "_thread", "time", "pyspark", "socket", "asyncio"}
# Third-party libraries the pure modules may use; attrs itself imports threading (for a
# thread-local in its repr), which is not a thread of ours, so it belongs to the baseline.
ALLOWED_DEPENDENCIES = "import attrs, numpy"
PACKAGE_DIR = Path(priority_kafka.__file__).parent

# Runs in a fresh interpreter. The package (and the edge packages) are stubbed so their
# __init__.py (the Kafka-facing API) does not run: only the module and what it imports load.
PROBE = """
import importlib, json, sys, types
for name, path in [("", {package_dir!r})] + [
    ("." + sub, {package_dir!r} + "/" + sub.replace(".", "/")) for sub in {edge_packages!r}
]:
    package = types.ModuleType("priority_kafka" + name)
    package.__path__ = [path]
    sys.modules["priority_kafka" + name] = package
{allowed}
before = set(sys.modules)
importlib.import_module("priority_kafka." + {module!r})
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def forbidden(names):
    """The names whose top-level package is forbidden in the pure core."""
    return sorted(name for name in names if name.split(".")[0] in FORBIDDEN)


@functools.cache
def loaded_by_import(module, package_dir=PACKAGE_DIR):
    """The modules a fresh interpreter loads to import ``priority_kafka.<module>``."""
    probe = PROBE.format(
        package_dir=str(package_dir), allowed=ALLOWED_DEPENDENCIES, module=module,
        edge_packages=EDGE_PACKAGES,
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def runs_at_import(tree):
    """The statements that run when the module is imported: module level, outside functions
    (lazy imports inside them run only when called) and outside ``if TYPE_CHECKING:``."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            pending += node.orelse
            continue
        yield node
        pending += [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)]


def source_imports(path):
    """The absolute module names the import-time import statements of the file name."""
    names = []
    for node in runs_at_import(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


@pytest.mark.parametrize("module", PURE_MODULES)
def test_importing_loads_no_forbidden_module(module):
    """Importing the module in a fresh interpreter adds none of the forbidden modules."""
    loaded = loaded_by_import(module)
    assert f"priority_kafka.{module}" in loaded
    assert forbidden(loaded) == []


def source_file(name, package_dir=PACKAGE_DIR):
    """The source file of ``priority_kafka.<...>`` module ``name``."""
    path = package_dir.joinpath(*name.split(".")[1:])
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@pytest.mark.parametrize("module", PURE_MODULES)
def test_source_imports_no_forbidden_module(module):
    """Neither the module nor a priority_kafka module it loads has a forbidden import statement.

    This catches modules already loaded before the import (``time`` at interpreter start-up,
    ``threading`` by attrs), which the sys.modules check above cannot see.
    """
    ours = [name for name in loaded_by_import(module) if name.startswith("priority_kafka.")]
    found = {name: forbidden(source_imports(source_file(name))) for name in ours}
    assert {name: imports for name, imports in found.items() if imports} == {}


def test_both_checks_detect_forbidden_imports(tmp_path):
    """A module importing socket and time fails both checks, so they can fail."""
    (tmp_path / "impure.py").write_text(
        "import socket\nif True:\n    from time import monotonic\n"
        "def lazy():\n    import kafka\n"
    )
    assert forbidden(loaded_by_import("impure", package_dir=tmp_path)) == ["socket"]
    assert forbidden(source_imports(source_file("priority_kafka.impure", tmp_path))) == [
        "socket",
        "time",
    ]
