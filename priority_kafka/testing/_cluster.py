"""A real multi-broker Apache Kafka cluster on loopback (``LocalKafkaCluster``).

Every node runs in KRaft *combined* mode, broker and controller in one JVM, like
:class:`~priority_kafka.testing.LocalKafkaBroker`, and the nodes form one static controller
quorum (``controller.quorum.voters``). Combined mode keeps a 3-broker cluster at 3 JVMs on a
small machine; its cost is that stopping a broker also stops one controller, so with 3 nodes
the cluster keeps serving with any one node down (the quorum needs a majority, 2 of 3) but not
with two. Separate controllers would survive more, and are not what this fixture is for.

With ``isolatable=True`` every listener of every node (the controller's too) sits behind a
loopback proxy (:mod:`priority_kafka.testing._proxy`) that the node advertises and the quorum's
voters name, so clients and the other nodes reach a node only through its proxies.
:meth:`LocalKafkaCluster.isolate_broker` cuts a node off from both: the links *to* its
listeners, and the links *from* its process to the other nodes' (its replica fetchers and its
heartbeats to the controllers), told apart by the process that holds each connection's local
port (Linux ``/proc``). A network partition of one node, with no root and no firewall.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from priority_kafka.errors import BrokerStartError
from priority_kafka.testing._broker import (
    _READY_TIMEOUT_S,
    LocalKafkaBroker,
    _cluster_id,
)
from priority_kafka.testing._jars import KAFKA_VERSION
from priority_kafka.testing._proxy import CUTS, Cut, ProxyLoop
from priority_kafka.testing._tls import TlsFiles, generate_tls

__all__ = ["CLUSTER_JVM_OPTIONS", "LocalKafkaCluster", "local_kafka_cluster"]

#: Per node: three of these share 2 cores and the memory of a developer's machine.
CLUSTER_JVM_OPTIONS = ("-Xms128m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
_SIGNALS = (signal.SIGTERM, signal.SIGKILL)
_POLL_S = 0.2


class _ClusterNode(LocalKafkaBroker):
    """One node of a :class:`LocalKafkaCluster`: a voter of the cluster's static quorum."""

    def __init__(self, node_id: int, cluster: LocalKafkaCluster, **options: Any) -> None:
        super().__init__(**options)
        self.node_id = node_id
        self._cluster = cluster
        #: Listener name -> the port of the proxy in front of it (isolatable clusters).
        self._proxy_ports: dict[str, int] = {}

    def _advertised(self, name: str, port: int) -> int:
        return self._proxy_ports.get(name, port)

    def _quorum_format_args(self) -> tuple[str, ...]:
        return ()  # a static quorum (controller.quorum.voters) is formatted without --standalone

    def _properties(self) -> dict[str, Any]:
        properties = super()._properties()
        del properties["controller.quorum.bootstrap.servers"]
        replicas = len(self._cluster.broker_ids)
        min_isr = min(2, replicas)
        properties.update({
            "node.id": self.node_id,
            "controller.quorum.voters": self._cluster._voters(),
            # Replicated like the users' clusters (3 replicas, min ISR 2), so a group's
            # coordinator moves with its leader instead of going away with one node. The min
            # ISR is broker-wide because the offsets topic has no setting of its own: at 1, a
            # commit (or a group's generation) acknowledged by a lone leader went back 20
            # minutes when that node was killed (docs/reliability.md, "The second hour run").
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
            "default.replication.factor": replicas,
            **self._extra,
        })
        return properties

    def __repr__(self) -> str:
        state = f"bootstrap_servers={self.bootstrap_servers!r}" if self.pid else "stopped"
        return f"LocalKafkaCluster node {self.node_id} ({state})"


class LocalKafkaCluster:
    """Several Apache Kafka nodes (KRaft combined mode, one static quorum) on loopback ports.

    Args:
        brokers: how many nodes (each a broker and a controller), 1 to 9; node ids are
            1 .. ``brokers``.
        properties: extra ``server.properties`` entries for every node; they override the
            defaults (every topic, the internal ones included, with ``brokers`` replicas and
            min ISR 2 by default).
        jvm_options: JVM flags of every node; the default is a heap smaller than a single
            broker's.
        log_dir: the parent of every node's data directory (``broker-<id>``); a fresh
            temporary directory (removed on stop) when not given.
        ready_timeout: seconds for :meth:`start` and :meth:`start_broker` to wait until the
            nodes serve and every running one is registered.
        scram_users, tls: as for :class:`~priority_kafka.testing.LocalKafkaBroker`, on every
            node; with ``tls`` all nodes present certificates of one generated CA.
        isolatable: put every listener of every node behind a loopback proxy (in this
            process), so that :meth:`isolate_broker` can cut a node off (Linux only). Every
            byte between clients and nodes and between nodes then goes through Python.

    Guarantees: :meth:`start` returns once every node answers metadata requests on its own
    listener and the cluster lists all of them; each node keeps its ports and data across
    :meth:`stop_broker` / :meth:`start_broker`; every JVM is stopped on :meth:`stop`, at
    interpreter exit and when the Python process dies (as for ``LocalKafkaBroker``).
    """

    def __init__(
        self,
        brokers: int = 3,
        properties: Mapping[str, object] | None = None,
        *,
        jvm_options: tuple[str, ...] = CLUSTER_JVM_OPTIONS,
        log_dir: str | Path | None = None,
        ready_timeout: float = _READY_TIMEOUT_S,
        scram_users: Mapping[str, str] | None = None,
        tls: bool = False,
        isolatable: bool = False,
    ) -> None:
        if not isinstance(isolatable, bool):
            raise ValueError(f"'isolatable' must be True or False (got {isolatable!r}).")
        if isinstance(brokers, bool) or not isinstance(brokers, int) or not 1 <= brokers <= 9:
            raise ValueError(f"'brokers' must be an int from 1 to 9 (got {brokers!r}).")
        if ready_timeout <= 0:
            raise ValueError(f"'ready_timeout' must be positive (got {ready_timeout!r}).")
        self._owns_dir = log_dir is None
        self._dir = Path(log_dir) if log_dir is not None else None
        self._ready_timeout = ready_timeout
        self._properties = dict(properties or {})
        self._jvm_options = tuple(jvm_options)
        self._nodes: dict[int, _ClusterNode] = {}
        self._ids = tuple(range(1, brokers + 1))
        self._security: dict[str, Any] = {"scram_users": scram_users, "tls": tls}
        LocalKafkaBroker(**self._security)  # the same checks as a broker's, before any start
        self._tls: TlsFiles | None = None
        self._proxies = ProxyLoop("cluster-proxies") if isolatable else None
        self._isolated: dict[int, Cut] = {}

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """The node ids, 1 .. ``brokers``."""
        return self._ids

    @property
    def running_brokers(self) -> tuple[int, ...]:
        """The ids of the nodes whose JVM runs."""
        return tuple(i for i, node in self._nodes.items() if node.pid is not None)

    @property
    def isolated_brokers(self) -> dict[int, str]:
        """The nodes cut off by :meth:`isolate_broker` and how (``"drop"`` or ``"reject"``)."""
        return dict(self._isolated)

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every node's PLAINTEXT listener, stopped nodes included (their
        ports stay theirs), for any client's ``bootstrap_servers``."""
        if not self._nodes:
            raise BrokerStartError("The cluster is not running; call start() first.")
        return ",".join(node._address("PLAINTEXT") for node in self._nodes.values())

    @property
    def tls(self) -> TlsFiles:
        """The CA, client certificate and key of every node's TLS listeners."""
        if self._tls is None:
            raise BrokerStartError("The cluster has no TLS listeners; pass tls=True and start it.")
        return self._tls

    def listener(self, name: str) -> str:
        """``host:port,...`` of listener ``name`` on every node (see
        :meth:`LocalKafkaBroker.listener`)."""
        if not self._nodes:
            raise BrokerStartError("The cluster is not running; call start() first.")
        names = ["PLAINTEXT", *(["SASL_PLAINTEXT"] if self._security["scram_users"] else []),
                 *self._nodes[self._ids[0]]._tls_ports]
        if name not in names:
            raise ValueError(f"'name' must be one of {names} for this cluster (got {name!r}).")
        return ",".join(node._address(name) for node in self._nodes.values())

    def broker(self, broker_id: int) -> LocalKafkaBroker:
        """The node ``broker_id``: its ``pid``, ``port``, ``log_file`` and ``bootstrap_servers``."""
        self._check_id(broker_id)
        if broker_id not in self._nodes:
            raise BrokerStartError("The cluster is not running; call start() first.")
        return self._nodes[broker_id]

    def start(self) -> LocalKafkaCluster:
        """Resolve the jars if needed, start every node and wait until all of them serve."""
        if self._nodes:
            return self
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="priority-kafka-cluster-"))
        for i in self._ids:
            node = _ClusterNode(
                i, self, properties=self._properties, jvm_options=self._jvm_options,
                log_dir=self._dir / f"broker-{i}", ready_timeout=self._ready_timeout,
                **self._security,
            )
            if self._security["tls"]:
                self._tls = self._tls or generate_tls(self._dir / "tls")
                node._tls = self._tls  # one CA for all nodes: a client trusts the cluster
            # Every voter's controller port is in every node's configuration: all chosen first.
            node._choose_ports()
            if self._proxies is not None:
                self._proxies.start()
                node._proxy_ports = {name: self._proxies.listen(port, node=i)
                                     for name, port in node._listener_ports().items()}
            self._nodes[i] = node
        cluster_id = _cluster_id()  # the nodes of one cluster are formatted with one id
        try:
            for node in self._nodes.values():
                node._cluster_id = cluster_id
                node._launch()  # not waiting: no node serves before a quorum majority runs
            self._wait_serving(self._ids)
        except BaseException:
            self.stop()
            raise
        return self

    def _voters(self) -> str:
        return ",".join(f"{i}@{n._address('CONTROLLER')}" for i, n in self._nodes.items())

    def stop(self, timeout: float = 20.0) -> None:
        """Stop every node and remove a temporary directory.

        Nodes with a temporary directory are killed: their data goes anyway, and a controlled
        shutdown of the last nodes would wait for a quorum that is already gone. Nodes in a
        given ``log_dir`` are all sent SIGTERM at once (SIGKILL after ``timeout``)."""
        nodes, self._nodes = self._nodes, {}
        for node in nodes.values():
            if self._owns_dir:
                node.kill()
            elif node._process is not None and node._process.poll() is None:
                node._process.terminate()
        for node in nodes.values():
            node.stop(timeout)
        if self._proxies is not None:
            self._proxies.stop()
            self._proxies = ProxyLoop("cluster-proxies")  # a new start gets fresh proxies
        self._isolated.clear()
        if self._owns_dir and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def stop_broker(self, broker_id: int, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop one node, keeping its ports and data for :meth:`start_broker`.

        ``SIGTERM`` is a controlled shutdown (the node hands its partition leadership to the
        others first, and this waits for it to exit); ``SIGKILL`` is a crash. Stopping a node
        that is already stopped does nothing.
        """
        node = self.broker(broker_id)
        if sig not in _SIGNALS:
            raise ValueError(f"'sig' must be signal.SIGTERM or signal.SIGKILL (got {sig!r}).")
        node._halt(kill=sig == signal.SIGKILL)

    def start_broker(self, broker_id: int) -> None:
        """Start a stopped node again on its ports and data; returns once it serves and the
        cluster lists it. Starting a running node does nothing; a node cut off by
        :meth:`isolate_broker` cannot be started before :meth:`heal_broker`."""
        node = self.broker(broker_id)
        if broker_id in self._isolated:
            raise BrokerStartError(
                f"Node {broker_id} is cut off (isolate_broker); heal_broker() it first.")
        if node.pid is None:
            node._launch()
            self._wait_serving((broker_id,))

    def isolate_broker(self, broker_id: int, how: Cut = "drop") -> None:
        """Cut node ``broker_id`` off from clients and the other nodes, as a network partition
        would, until :meth:`heal_broker`; the node keeps running.

        Every link to its listeners and every link from its process (replication, its
        heartbeats to the controllers, its votes) is cut: ``how="drop"`` holds their bytes
        and new connections (requests hang until the other side's timeouts; connections that
        outlive the cut carry on), ``"reject"`` resets them and refuses new ones. Needs a
        cluster started with ``isolatable=True``, on Linux."""
        if self._proxies is None:
            raise BrokerStartError(
                "This cluster has no proxies to cut; start it with isolatable=True.")
        if how not in CUTS:
            raise ValueError(f"'how' must be one of {list(CUTS)} (got {how!r}).")
        node = self.broker(broker_id)
        self._isolated[broker_id] = how
        self._proxies.cut(broker_id, how, node.pid)

    def heal_broker(self, broker_id: int) -> None:
        """Undo :meth:`isolate_broker`: held bytes and connections go on, new ones get through.
        Healing a node that is not cut off does nothing."""
        self._check_id(broker_id)
        if self._proxies is not None and self._isolated.pop(broker_id, None) is not None:
            self._proxies.heal([broker_id])

    def rolling_restart(
        self, *, sig: signal.Signals = signal.SIGTERM, in_sync_timeout: float = 120.0
    ) -> None:
        """Restart every node in turn, as an operator upgrading the cluster would: stop it
        (``sig``), start it, and wait until every partition is fully in sync again
        (:meth:`wait_in_sync`) before the next one, so no partition loses two replicas."""
        self.wait_in_sync(in_sync_timeout)
        for broker_id in self._ids:
            self.stop_broker(broker_id, sig)
            self.start_broker(broker_id)
            self.wait_in_sync(in_sync_timeout)

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The id of the node leading ``topic``'s ``partition`` now, or None while it has no
        leader (all its replicas down, or an election under way)."""
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"'topic' must be a non-empty str (got {topic!r}).")
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise ValueError(f"'partition' must be an int >= 0 (got {partition!r}).")
        for described in self._describe([topic]):
            for p in described["partitions"]:
                if p["partition_index"] == partition:
                    return int(p["leader_id"]) if p["leader_id"] >= 0 else None
        raise ValueError(f"{topic!r} has no partition {partition} on this cluster.")

    def leaders(self, topic: str) -> dict[int, int | None]:
        """Every partition of ``topic`` and the id of the node leading it now (None while it
        has no leader), from one metadata request."""
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"'topic' must be a non-empty str (got {topic!r}).")
        return {p["partition_index"]: int(p["leader_id"]) if p["leader_id"] >= 0 else None
                for described in self._describe([topic]) for p in described["partitions"]}

    def active_controller(self) -> int | None:
        """The id of the node whose controller leads the quorum now (it fences nodes whose
        heartbeats stop and moves their leaderships), or None during a quorum election."""
        quorum = self._admin_call(lambda admin: admin.describe_metadata_quorum())
        leader = quorum["topics"][0]["partitions"][0]["leader_id"]
        return int(leader) if leader >= 0 else None

    def wait_in_sync(self, timeout: float = 120.0) -> None:
        """Wait until every partition of every topic has a leader and all its replicas in sync.

        Raises :class:`~priority_kafka.errors.BrokerStartError` naming the partitions still
        behind after ``timeout`` seconds."""
        behind: list[str] = []

        def in_sync() -> bool:
            behind[:] = [
                f"{t['name']}[{p['partition_index']}]"
                for t in self._describe(None) for p in t["partitions"]
                if p["leader_id"] < 0 or set(p["isr_nodes"]) != set(p["replica_nodes"])
            ]
            return not behind

        self._wait_until(in_sync, timeout, lambda: f"partitions not in sync: {behind[:10]}")

    def _wait_serving(self, ids: tuple[int, ...]) -> None:
        deadline = time.monotonic() + self._ready_timeout
        for i in ids:
            node = self._nodes[i]
            # The cluster's timeout bounds the whole start, not each node's wait.
            node._ready_timeout = max(deadline - time.monotonic(), 1e-3)
            try:
                node._wait_ready()
            finally:
                node._ready_timeout = self._ready_timeout
        running = set(self.running_brokers)
        registered: set[int] = set()

        def all_registered() -> bool:
            registered.clear()
            registered.update(b["broker_id"] for b in self._admin_call(
                lambda admin: admin.describe_cluster())["brokers"])
            return running <= registered

        self._wait_until(all_registered, deadline - time.monotonic(),
                         lambda: f"registered {sorted(registered)} of {sorted(running)}")

    def _wait_until(self, done: Callable[[], bool], timeout: float,
                    state: Callable[[], str]) -> None:
        from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while True:
            try:
                if done():
                    return
            except KafkaError as exc:  # a node going away mid-request; asked again
                last_error = exc
            if time.monotonic() >= deadline:
                raise BrokerStartError(
                    f"The Kafka cluster did not settle within {timeout:g}s ({state()}; "
                    f"last error: {last_error!r})."
                )
            time.sleep(_POLL_S)

    def _describe(self, topics: list[str] | None) -> list[dict[str, Any]]:
        return list(self._admin_call(lambda admin: admin.describe_topics(topics)))

    def _admin_call(self, call: Callable[[Any], Any], timeout: float = 30.0) -> Any:
        """``call(admin)`` through the running nodes, asked again for up to ``timeout`` s when
        it fails on a connection or times out: the cluster's metadata names a killed or cut-off
        node until the controller fences it (``broker.session.timeout.ms``), and a request may
        go there. Cut-off nodes are not asked first."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaConnectionError, KafkaTimeoutError, RequestTimedOutError

        deadline = time.monotonic() + timeout
        while True:
            running = [self._nodes[i].bootstrap_servers for i in self.running_brokers
                       if i not in self._isolated]
            if not running:
                raise BrokerStartError("No node of the cluster is running.")
            try:
                # Shorter with a node cut off: a request that went there hangs until then.
                admin = KafkaAdminClient(bootstrap_servers=running,
                                         request_timeout_ms=2500 if self._isolated else 5000,
                                         bootstrap_timeout_ms=5000)
                try:
                    return call(admin)
                finally:
                    admin.close()
            except (KafkaConnectionError, KafkaTimeoutError, RequestTimedOutError):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(_POLL_S)

    def _check_id(self, broker_id: int) -> None:
        if broker_id not in self._ids or isinstance(broker_id, bool):
            raise ValueError(
                f"'broker_id' must be one of {list(self._ids)} (got {broker_id!r}).")

    def __enter__(self) -> LocalKafkaCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        if not self._nodes:
            return f"LocalKafkaCluster(brokers={len(self._ids)}, stopped, kafka={KAFKA_VERSION})"
        return (f"LocalKafkaCluster(bootstrap_servers={self.bootstrap_servers!r}, "
                f"running={list(self.running_brokers)}, kafka={KAFKA_VERSION})")


@contextlib.contextmanager
def local_kafka_cluster(
    brokers: int = 3, properties: Mapping[str, object] | None = None, **options: Any
) -> Iterator[LocalKafkaCluster]:
    """Start a :class:`LocalKafkaCluster` for the ``with`` block and stop it afterwards."""
    with LocalKafkaCluster(brokers, properties, **options) as cluster:
        yield cluster
