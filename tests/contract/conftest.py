"""The ``kit`` fixture: each backend of the client contract in turn (tests/contract/kits.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from priority_kafka.families import family
from tests.contract.kits import BACKENDS, FakeKit, FamilyKit, Kit


@pytest.fixture(params=BACKENDS)
def kit(request: pytest.FixtureRequest) -> Iterator[Kit]:
    """Each backend in turn, closed after the test."""
    servers = request.getfixturevalue("bootstrap_servers")
    chosen: Kit = (
        FakeKit(servers) if request.param == "fake"
        else FamilyKit(servers, family(request.param))
    )
    try:
        yield chosen
    finally:
        chosen.close()
