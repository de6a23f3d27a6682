"""The package stays in pieces a reader can hold: no module over 600 lines, no class over 500.

The limits are the project's (HELPER_RULES, issue 21): a module or class past them is split by
mechanism (docstrings stay), as the two PriorityConsumers were into ``consumer/_*.py`` and
``confluent/_*.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import priority_kafka
from priority_kafka.families import Family

MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 500
PACKAGE_DIR = Path(priority_kafka.__file__).parent
#: The private modules every family's folder has, one per role (docs/architecture.md).
FAMILY_ROLES = {"_client.py", "_dead_letters.py", "_family.py", "_records.py", "_transactions.py"}


def oversized(source: str, name: str) -> list[str]:
    """What in one module's ``source`` is over the limits, each as ``name[:Class] lines``."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{name} {lines}")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            # From the first decorator, as a reader sees the class.
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            size = (node.end_lineno or node.lineno) - start + 1
            if size > MAX_CLASS_LINES:
                found.append(f"{name}:{node.name} {size}")
    return found


def test_no_module_or_class_of_the_package_is_over_the_limits():
    """Every module of priority_kafka is at most 600 lines and every class at most 500."""
    modules = sorted(PACKAGE_DIR.rglob("*.py"))
    assert len(modules) > 50  # the walk found the package
    found = [
        item
        for path in modules
        for item in oversized(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE_DIR)))
    ]
    assert found == []


def test_the_count_sees_a_long_class_and_a_long_module():
    """The check counts a class from its decorator to its last line, and a module's lines."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES - 2))
    at_limit = f"@decorated\nclass Fits:\n{body}\n"
    assert oversized(at_limit, "m.py") == []
    over = f"@decorated\nclass Long:\n{body}\n    last = 0\n"
    assert oversized(over, "m.py") == [f"m.py:Long {MAX_CLASS_LINES + 1}"]
    long_module = "\n" * MAX_MODULE_LINES + "x = 1\n"
    assert oversized(long_module, "m.py") == [f"m.py {MAX_MODULE_LINES + 1}"]


def test_every_family_folder_has_the_same_role_modules(family: Family) -> None:
    """A client family is a folder whose role modules have the same names as the other's, and
    its registry entry names that folder's ``_family`` module."""
    package, _, module = family.module.rpartition(".")
    folder = PACKAGE_DIR.joinpath(*package.split(".")[1:])
    assert module == "_family"
    assert {path.name for path in folder.glob("_*.py")} >= FAMILY_ROLES


def test_no_family_edge_module_is_left_at_the_package_root() -> None:
    """The kafka-python edge lives in its folder (``kafka_python/``), not beside the core."""
    assert sorted(path.name for path in PACKAGE_DIR.glob("_kafka*.py")) == []


#: Imports of another package's private module that predate this check, each with why it stays
#: for now: the kafka-python library edge (its imports and version flags) that the apps use
#: whatever the family (the lag reader and topic lister are kafka-python's); the broker jars
#: the CLI's ``broker`` command starts; a kafka-python producer a confluent executor is handed
#: for its dead letters; the kafka-python front end's settings its registry entry builds from.
#: The list only shrinks: a new reach fails.
KNOWN_REACHES = {
    ("priority_kafka.cli", "priority_kafka.kafka_python._kafka"),
    ("priority_kafka.cli._levels", "priority_kafka.kafka_python._kafka"),
    ("priority_kafka.cli.produce", "priority_kafka.kafka_python._kafka"),
    ("priority_kafka.cli.topics", "priority_kafka.kafka_python._kafka"),
    ("priority_kafka.metrics", "priority_kafka.kafka_python._kafka"),
    ("priority_kafka.spark.client", "priority_kafka.kafka_python._kafka"),
    ("priority_kafka.cli._common", "priority_kafka.testing._jars"),
    ("priority_kafka.confluent._dead_letters", "priority_kafka.kafka_python._dead_letters"),
    ("priority_kafka.kafka_python._family", "priority_kafka.kafka_python.consumer._settings"),
}


def private_reaches(source: str, module: str, is_package: bool) -> set[tuple[str, str]]:
    """The (module, imported) pairs where ``module`` imports a private module (``_x``) of a
    package other than its own or one of its ancestors (``priority_kafka._structs`` is the
    whole package's; ``priority_kafka.executor._pool`` only the executor's)."""
    own = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
            continue
        parts = node.module.split(".")
        if parts[0] != "priority_kafka":
            continue
        for index, part in enumerate(parts[1:], start=1):
            if part.startswith("_"):
                owner = ".".join(parts[:index])
                if not (own == owner or own.startswith(owner + ".")):
                    found.add((module, node.module))
                break
    return found


def test_a_private_module_is_imported_only_inside_its_package():
    """No module reaches into another package's private modules: what two packages share
    has an interface (both executors import ``priority_kafka._workers``, never
    ``_workers._pool``; the Spark source reaches each family through ``Family.spark()``)."""
    assert private_reaches(
        "from priority_kafka.executor._pool import WorkerPool\n"
        "from priority_kafka._structs import TopicPartition\n"
        "from priority_kafka.confluent._records import Record\n",
        "priority_kafka.confluent.share_executor", is_package=False,
    ) == {("priority_kafka.confluent.share_executor", "priority_kafka.executor._pool")}
    found = set()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        found |= private_reaches(path.read_text(encoding="utf-8"), module, is_package)
    assert sorted(found - KNOWN_REACHES) == []
    assert sorted(KNOWN_REACHES - found) == []  # one that went: take it off the list


def imported_top_packages(source: str) -> set[str]:
    """The top-level packages ``source`` imports (at any depth of its code)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.partition(".")[0])
    return found


def test_the_benchmarks_import_nothing_of_the_tests():
    """Tests import benchmarks (their scenarios, the executor child, the traffic and its
    tally), never the other way: a benchmark runs from a checkout without the tests."""
    assert imported_top_packages(
        "import os\nfrom tests import executor_child\ndef f():\n    import tests.fakes\n"
    ) == {"os", "tests"}
    benchmarks = sorted((PACKAGE_DIR.parent / "benchmarks").rglob("*.py"))
    assert len(benchmarks) > 30  # the walk found them
    reaching = [str(path.relative_to(PACKAGE_DIR.parent)) for path in benchmarks
                if "tests" in imported_top_packages(path.read_text(encoding="utf-8"))]
    assert reaching == []


def _benchmark_names_passed_on(root: Path) -> list[str]:
    """Names a test module imports from a test module or a benchmark that only imported them
    from a benchmark (a second path to the same object)."""
    def from_benchmarks(module: str) -> set[str]:
        """What ``module`` (a file under ``root``) imports from a benchmark."""
        path = root / (module.replace(".", "/") + ".py")
        if not path.exists():
            return set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        return {alias.asname or alias.name for node in tree.body
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "benchmarks") for alias in node.names}

    passed_on = []
    for path in sorted((root / "tests").rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if not module or not module.startswith(("tests.", "benchmarks.")):
                continue
            taken = from_benchmarks(module)
            passed_on += [f"{path.relative_to(root)}: {alias.name} from {module}"
                          for alias in node.names if alias.name in taken]
    return passed_on


def test_the_tests_import_a_benchmark_name_from_where_it_is_defined():
    """A test takes a benchmark's helper (``Running``, ``wait_for``, ...) from the benchmark
    module that defines it, not passed on by a test module or another benchmark: one import
    path per object."""
    assert _benchmark_names_passed_on(PACKAGE_DIR.parent) == []
