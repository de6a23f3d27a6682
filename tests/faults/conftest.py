"""Fault-suite fixtures: the scenario size (reduced or ``--faults-full``) and the figures table.

Every scenario reports one row (``fault_report``); the rows are printed at the end of the
session and, with ``--faults-json PATH`` or ``PRIORITY_KAFKA_FAULTS_JSON``, appended to that
file, which is where the table of docs/reliability.md comes from.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_ROWS: list[dict[str, Any]] = []


#: Per test at full size (the suite's is 300 s): 30 leader kills with a restart each take
#: longer on a shared 2-core machine.
FULL_SIZE_TIMEOUT_S = 3600


def _full(config: pytest.Config) -> bool:
    return bool(config.getoption("--faults-full")) or (
        os.environ.get("PRIORITY_KAFKA_FAULTS_FULL", "") not in ("", "0")
    )


@pytest.fixture(scope="session")
def faults_full(request: pytest.FixtureRequest) -> bool:
    """True for the full-size scenarios (``--faults-full`` or PRIORITY_KAFKA_FAULTS_FULL=1)."""
    return _full(request.config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _full(config):
        for item in items:
            if item.get_closest_marker("faults") is not None:
                item.add_marker(pytest.mark.timeout(FULL_SIZE_TIMEOUT_S))


@pytest.fixture
def fault_report(
    request: pytest.FixtureRequest, faults_full: bool
) -> Iterator[Callable[..., None]]:
    """Record one scenario's figures (a row of the reliability table)."""

    def report(scenario: str, **figures: Any) -> None:
        row = {"scenario": scenario, "test": request.node.nodeid,
               "size": "full" if faults_full else "reduced",
               "at": time.strftime("%Y-%m-%dT%H:%M:%S"), **figures}
        _ROWS.append(row)
        print(f"fault figures: {json.dumps(row)}")

    yield report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not _ROWS:
        return
    terminalreporter.section("fault suite figures")
    for row in _ROWS:
        figures = {k: v for k, v in row.items() if k not in ("scenario", "test", "at")}
        terminalreporter.write_line(f"{row['scenario']}: {json.dumps(figures)}")
    path = config.getoption("--faults-json") or os.environ.get("PRIORITY_KAFKA_FAULTS_JSON")
    if path:
        target = Path(path)
        rows = json.loads(target.read_text()) if target.exists() else []
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(rows + _ROWS, indent=1) + "\n")
        terminalreporter.write_line(f"appended {len(_ROWS)} rows to {target}")
