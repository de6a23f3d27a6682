"""examples/asyncio_app.py and examples/asyncio_executor.py run as programs against the session's
broker (docs/asyncio.md shows them and their transcripts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.integration


def test_the_asyncio_service_starts_and_stops_the_priority_consumer_in_its_lifespan(
    bootstrap_servers: str,
) -> None:
    """The lifespan starts the consumer, every order is handled, and the lifespan commits and
    stops it: the program exits 0 with its transcript in that order."""
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap_servers, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "asyncio_app.py")],
        capture_output=True, text=True, timeout=180, env=env, check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "lifespan", "produced 300 orders on 3 levels", "lifespan", "handled {2",
    ], lines
    assert lines[0].startswith("lifespan: consumer started on orders-")
    assert lines[2] == "lifespan: consumer committed and stopped"
    assert lines[3] == "handled {2: 100, 1: 100, 0: 100}"


def test_the_asyncio_service_runs_the_executor_on_its_own_loop_in_its_lifespan(
    bootstrap_servers: str,
) -> None:
    """examples/asyncio_executor.py: the lifespan enters ``async with ShardedExecutor``, every
    order is handled on the service's loop in key order, and leaving the lifespan drains,
    commits and closes it: the program exits 0 with its transcript in that order."""
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap_servers, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "asyncio_executor.py")],
        capture_output=True, text=True, timeout=180, env=env, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "lifespan: executor running on the service's loop",
        "produced 300 orders on 3 levels",
        "lifespan: executor drained, committed and closed (300 handled)",
        "handled {2: 100, 1: 100, 0: 100}, each customer's orders in order: True",
    ], done.stdout
