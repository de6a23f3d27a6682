"""Tests of priority_kafka.sharding: the ordering modes (their lanes: tests/test_scheduling.py)."""

from __future__ import annotations

import pytest

from priority_kafka.errors import ConfigError
from priority_kafka.sharding import ORDERINGS, check_ordering


@pytest.mark.parametrize("mode", ORDERINGS)
def test_every_ordering_is_accepted(mode: str) -> None:
    """The three documented modes pass the check unchanged."""
    assert check_ordering(mode) == mode


def test_bad_ordering_names_the_choices() -> None:
    """An unknown mode is a ConfigError listing the valid ones."""
    with pytest.raises(ConfigError, match="'ordering' must be one of key, partition, unordered"):
        check_ordering("keyed")

