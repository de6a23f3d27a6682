"""Real Apache Kafka on loopback for tests, demos and benchmarks: one broker or a cluster.

:class:`LocalKafkaBroker` is a single KRaft node; :class:`LocalKafkaCluster` is several (3 by
default) forming one cluster, whose nodes can be stopped (SIGTERM or SIGKILL), started again,
restarted in turn and (``isolatable=True``) cut off from clients and each other. Both run
from the same jars, resolved from Maven Central by Maven (``broker-pom.xml`` in the package)
into a cache directory and reused from there::

    from priority_kafka.testing import local_kafka, local_kafka_cluster

    with local_kafka() as broker:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)

    with local_kafka_cluster(3) as cluster:
        cluster.stop_broker(cluster.leader_of("orders-2", 0), signal.SIGKILL)

Guarantees: ``start()`` returns only once the broker (every node of a cluster) has answered a
real metadata request; every JVM started here is stopped on ``stop()``, at interpreter exit,
and (on Linux) by the kernel when the Python process dies, so no JVM outlives its test session.
For pytest, ``pytest_plugins = ["priority_kafka.pytest_plugin"]`` provides the session-scoped
``kafka_broker`` and ``kafka_cluster`` fixtures.
"""

from priority_kafka.testing._broker import (
    DEFAULT_JVM_OPTIONS,
    LocalKafkaBroker,
    local_kafka,
)
from priority_kafka.testing._broker import _free_port as _free_port  # tests choose fixed ports
from priority_kafka.testing._cluster import (
    CLUSTER_JVM_OPTIONS,
    LocalKafkaCluster,
    local_kafka_cluster,
)
from priority_kafka.testing._jars import KAFKA_VERSION, broker_jars, cache_root
from priority_kafka.testing._tls import TlsFiles, generate_tls

__all__ = [
    "CLUSTER_JVM_OPTIONS",
    "DEFAULT_JVM_OPTIONS",
    "KAFKA_VERSION",
    "LocalKafkaBroker",
    "LocalKafkaCluster",
    "TlsFiles",
    "broker_jars",
    "cache_root",
    "generate_tls",
    "local_kafka",
    "local_kafka_cluster",
]
