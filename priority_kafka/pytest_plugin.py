"""pytest fixtures for code that talks to Kafka.

Enable with ``pytest_plugins = ["priority_kafka.pytest_plugin"]`` in a ``conftest.py``.

``kafka_broker`` (session scope) is a running :class:`~priority_kafka.testing.LocalKafkaBroker`,
started once for the session and stopped at its end, whatever happened in between. When the
environment variable ``KAFKA_BOOTSTRAP_SERVERS`` is set, that external broker is used instead
and nothing is started. A broker that cannot start fails the tests that need it; it never
skips them.

``kafka_cluster`` is a running 3-node :class:`~priority_kafka.testing.LocalKafkaCluster`,
started once for the session at the first test that asks for it, with TLS listeners and the
SASL users ``CLUSTER_TEST_USERS`` besides PLAINTEXT, every listener behind a proxy so that a
node can be cut off (``isolatable=True``), and a dead node fenced after 3 s instead of 9
(``CLUSTER_TEST_PROPERTIES``). A test may stop nodes (``stop_broker``) or cut them off
(``isolate_broker``); after it, every node is healed and started again and the fixture waits
until every partition is back in sync, so the next test finds the whole cluster.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from priority_kafka.testing import LocalKafkaBroker, LocalKafkaCluster

__all__ = ["bootstrap_servers", "kafka_broker", "kafka_cluster", "unique_name"]


class ExternalBroker:
    """A broker someone else runs, found through ``KAFKA_BOOTSTRAP_SERVERS``."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def __repr__(self) -> str:
        return f"ExternalBroker(bootstrap_servers={self.bootstrap_servers!r})"


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[LocalKafkaBroker | ExternalBroker]:
    """A running Kafka broker for the whole test session."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield ExternalBroker(external)
        return
    with LocalKafkaBroker() as broker:
        yield broker


#: The SCRAM (and PLAIN) users of ``kafka_cluster``'s SASL listeners: test credentials only.
CLUSTER_TEST_USERS = {"alice": "alice-test-password"}


#: ``kafka_cluster``'s server properties: the controller fences a node whose heartbeats stop
#: after 3 s (Kafka's default is 9 s), so a test's elections after a crash or a cut take a
#: third of the time; heartbeats every 0.5 s keep a live node well clear of it.
CLUSTER_TEST_PROPERTIES = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}


@pytest.fixture(scope="session")
def _kafka_cluster_session() -> Iterator[LocalKafkaCluster]:
    with LocalKafkaCluster(3, CLUSTER_TEST_PROPERTIES, tls=True, scram_users=CLUSTER_TEST_USERS,
                           isolatable=True) as cluster:
        yield cluster


@pytest.fixture
def kafka_cluster(_kafka_cluster_session: LocalKafkaCluster) -> Iterator[LocalKafkaCluster]:
    """The session's 3-node cluster, whole again after the test (cut-off nodes healed, stopped
    nodes restarted)."""
    cluster = _kafka_cluster_session
    yield cluster
    isolated = set(cluster.isolated_brokers)
    for broker_id in sorted(isolated):
        cluster.heal_broker(broker_id)
    stopped = set(cluster.broker_ids) - set(cluster.running_brokers)
    for broker_id in sorted(stopped):
        cluster.start_broker(broker_id)
    if stopped or isolated:
        cluster.wait_in_sync()


@pytest.fixture(scope="session")
def bootstrap_servers(kafka_broker: LocalKafkaBroker | ExternalBroker) -> str:
    """``host:port`` of the session's broker."""
    return kafka_broker.bootstrap_servers


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Make names (topics, groups) unique to this test, so tests share one broker safely."""
    token = uuid.uuid4().hex[:8]
    test = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]

    def make(prefix: str) -> str:
        return f"{prefix}-{test}-{token}"

    return make
