"""Only the registry (priority_kafka/families.py) tells the client families apart by name: no
module of the package, the tests, the benchmarks or the examples compares a value with a
family's name or spells out a list (or a table) of families, by their names or by the
registry's constants (``KAFKA_PYTHON``, ``CONFLUENT``...: a dict keyed by them, as the Spark
source's driver and reader tables were, is a second list of the families). They ask the
registry instead: ``family(name)``, a capability (``Family.librdkafka``, ``exactly_once``...),
``having(...)``, ``Family.load()`` / ``Family.spark()`` (the family folder's modules), the
``family`` fixture and ``tests.conftest.over_families`` (issue 38, deliverable 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from priority_kafka import families
from priority_kafka.families import NAMES, Family

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("priority_kafka", "benchmarks", "tests", "examples")
REGISTRY = "priority_kafka/families.py"
#: The registry's own unit test names each entry by its constant (``family(x) is CONFLUENT``).
REGISTRY_TEST = "tests/test_families.py"
#: The registry's constant for each family, spelled as its name (KAFKA_PYTHON, CONFLUENT,
#: AIOKAFKA; not DEFAULT, a role, whose name the producers' sentinels share).
CONSTANTS = frozenset(
    name for name, value in vars(families).items()
    if isinstance(value, Family) and name == value.name.upper().replace("-", "_")
)


def _names_a_family(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in NAMES


def _is_a_family(node: ast.AST | None) -> bool:
    """A family's name, or one of the registry's family constants (``CONFLUENT``,
    ``families.CONFLUENT``)."""
    return _names_a_family(node) or (
        isinstance(node, ast.Name) and node.id in CONSTANTS
    ) or (isinstance(node, ast.Attribute) and node.attr in CONSTANTS)


def offences(source: str, constants: bool = True) -> list[tuple[int, str]]:
    """Where ``source`` compares a value with a family's name (``==``, ``!=``, ``in``...,
    directly or through a literal collection holding one) or spells out two or more families
    in a literal tuple, list, set or dict's keys: (line, the code). With ``constants``, the
    registry's family constants count as names (``x is CONFLUENT``, ``{KAFKA_PYTHON: ...,
    CONFLUENT: ...}``)."""
    is_family = _is_a_family if constants else _names_a_family
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            bad = any(
                is_family(operand)
                or (isinstance(operand, ast.Tuple | ast.List | ast.Set)
                    and any(map(is_family, operand.elts)))
                for operand in operands
            )
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            bad = sum(map(is_family, node.elts)) >= 2
        elif isinstance(node, ast.Dict):
            bad = sum(map(is_family, node.keys)) >= 2
        else:
            continue
        if bad:
            found.append((node.lineno, ast.unparse(node)))
    return found


def scanned_files() -> list[str]:
    """The Python files of the scanned folders, relative to the repository, but the registry."""
    return sorted(
        relative for folder in SCANNED for path in (ROOT / folder).rglob("*.py")
        if (relative := path.relative_to(ROOT).as_posix()) != REGISTRY
    )


@pytest.mark.parametrize("source", [
    f"if client == {NAMES[0]!r}: pass",  # (not spelt out: a grep for the name stays clean)
    'ok = "confluent" != family',
    'ok = name not in ("aiokafka",)',
    'CLIENTS = ("kafka-python", "confluent")',
    'SYNC = ["kafka-python", "confluent", "share"]',
    'TARGETS = {"kafka-python": 0.5, "confluent": 0.1}',
    'names = {"kafka-python", "kafka-python priority", "confluent"}',
    "readers = {KAFKA_PYTHON: KafkaPythonReader, CONFLUENT: ConfluentReader}",
    "drivers = {families.KAFKA_PYTHON: KafkaPythonDriver, families.AIOKAFKA: Driver}",
    "if chosen is CONFLUENT: pass",
    "ok = chosen in (AIOKAFKA,)",
    "SIDES = (KAFKA_PYTHON, CONFLUENT)",
])
def test_the_scan_finds_a_comparison_or_a_list_of_families(source):
    assert [line for line, _ in offences(source)] == [1], source


@pytest.mark.parametrize("source", [
    'if not family(client).librdkafka: pass',
    'options = ["--client", "confluent", "--share"]',
    'consumer = build(client="kafka-python")',
    'assert parse().client == CONFLUENT.name',
    'targets = {client: target(client) for client in CLIENTS}',
    "reader = family(options.client).spark().Reader(options, offset_range)",
    "settings = KAFKA_PYTHON.settings_of(given, chosen.key_style)",
    "key_of = None if priority is DEFAULT else priority",
])
def test_the_scan_passes_what_asks_the_registry_or_names_one_family(source):
    assert offences(source) == [], source


def test_only_the_registry_tells_the_families_apart_by_name():
    """No scanned module compares with a family's name or lists families, but the registry."""
    files = scanned_files()
    assert len(CONSTANTS) == len(families.FAMILIES)  # each family's constant is known
    assert "tests/conftest.py" in files and "benchmarks/_clients.py" in files  # the walk ran
    found = [
        f"{relative}:{line}: {code}"
        for relative in files
        for line, code in offences(
            (ROOT / relative).read_text(), constants=relative != REGISTRY_TEST
        )
    ]
    assert found == [], "\n".join(found)

