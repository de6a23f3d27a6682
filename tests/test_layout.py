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
