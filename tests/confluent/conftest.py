"""Fixtures of the confluent-kafka tests: a fresh logical topic with three levels."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from priority_kafka import create_priority_topics

sys.path.insert(0, str(Path(__file__).parent))  # helpers.py


@pytest.fixture
def topic(bootstrap_servers: str, unique_name) -> str:
    """A fresh logical topic: three priority topics of one partition each."""
    name = unique_name("orders")
    create_priority_topics(bootstrap_servers, name, 3)
    return name


@pytest.fixture
def topic2(bootstrap_servers: str, unique_name) -> str:
    """A fresh logical topic: three priority topics of two partitions each."""
    name = unique_name("split")
    create_priority_topics(bootstrap_servers, name, 3, num_partitions=2)
    return name
