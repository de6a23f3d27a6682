"""A real single-node Apache Kafka broker for tests, demos and benchmarks (``LocalKafkaBroker``).

The broker runs in KRaft combined mode (broker and controller in one JVM) on free loopback
ports (or a fixed PLAINTEXT ``port``), with its own temporary log directory, and can be
restarted in place (same ports, same data). :class:`~priority_kafka.testing.LocalKafkaCluster`
builds its nodes from this class.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from priority_kafka.errors import BrokerStartError
from priority_kafka.testing._jars import _LOG_TAIL_LINES, KAFKA_VERSION, _require_tool, broker_jars
from priority_kafka.testing._launcher import launch
from priority_kafka.testing._tls import (
    TLS_LISTENERS,
    TlsFiles,
    generate_tls,
    plain_jaas,
    tls_properties,
)

__all__ = ["DEFAULT_JVM_OPTIONS", "LocalKafkaBroker", "local_kafka"]

_READY_TIMEOUT_S = 90.0
# A first start whose chosen ports another process took meanwhile draws new ones this often.
_PORT_RETRIES = 2
_PORT_TAKEN = "Address already in use"
# A fast-starting, small JVM: the broker in tests holds little data and 2 cores are shared.
DEFAULT_JVM_OPTIONS = ("-Xms256m", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

_LOG4J2_CONFIG = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache
logger.apache.level = WARN
# Group and transaction coordinators' loads, generations and fencing: what a post-mortem of a
# consumer group needs (they live under org.apache in Kafka 4).
logger.coordinator.name = org.apache.kafka.coordinator
logger.coordinator.level = INFO
"""


def _ephemeral_ports_start() -> int:
    """The first port the kernel hands out to outgoing connections (Linux; its default else)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# Every port _free_port() has handed out in this process: it is free until its broker binds
# it, so a later draw could hand it out again (a broker's listeners, or a cluster's nodes).
_HANDED_OUT: set[int] = set()


def _free_port() -> int:
    """A free loopback port below the kernel's ephemeral range, never one this process was
    handed before. A port the kernel picks (bind to 0) is one it also gives the local end of
    outgoing connections, so between this choice and the JVM's bind a client socket could take
    it: "Address already in use" at a broker's start, seen with three test workers starting
    brokers and clients at once. A port drawn twice put two of a broker's listeners on one
    port (refused when its storage was formatted, once in a CI run)."""
    start = _ephemeral_ports_start()
    for _ in range(100 if start > 11_000 else 0):
        port = 10_000 + secrets.randbelow(start - 10_000)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use: draw again
        _HANDED_OUT.add(port)
        return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def _cluster_id() -> str:
    while True:
        candidate = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        if not candidate.startswith("-"):  # a leading dash reads as an option to StorageTool
            return candidate


_RUNNING: set[LocalKafkaBroker] = set()


@atexit.register
def _stop_all() -> None:
    for broker in list(_RUNNING):
        broker.stop()


def _check_port_free(port: int) -> None:
    """Fail at once, naming the port, when a given port is taken (the JVM would say so only
    after its start, among 40 lines of its log)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise BrokerStartError(
                f"Port {port} on 127.0.0.1 is taken ({exc.strerror}): another broker may be "
                f"running there (`ss -ltnp 'sport = :{port}'` names the process); stop it, or "
                f"choose another port."
            ) from None


class LocalKafkaBroker:
    """One single-node Apache Kafka broker (KRaft combined mode) on loopback ports.

    Args:
        properties: extra ``server.properties`` entries (e.g. ``{"num.partitions": 3}``);
            they override the defaults.
        jvm_options: JVM flags; the default is a small heap tuned for a fast start.
        log_dir: where the broker keeps its data and ``server.log``; a fresh temporary
            directory (removed on stop) when not given.
        ready_timeout: seconds to wait for the broker to answer a metadata request.
        port: the PLAINTEXT listener's port (default: a free one, chosen at the first start).
            The controller's port is always chosen free. Both stay the same across restarts.
        advertised_port: the port the broker tells clients to connect to (default: ``port``);
            set it to put a proxy listening there between clients and the broker. Readiness
            is then checked through it, so the proxy must be running before :meth:`start`.
        tls: add three TLS listeners, each on its own free port (:meth:`listener`): ``SSL``
            (server authentication), ``MTLS`` (client certificates required) and, with
            ``scram_users``, ``SASL_SSL`` (SCRAM-SHA-512 and PLAIN for those users). A CA and
            certificates are generated at the first start (:attr:`tls`; needs ``cryptography``).
        scram_users: ``{user: password}`` for a second listener, ``SASL_PLAINTEXT`` with
            SCRAM-SHA-512 on its own free port (:attr:`sasl_bootstrap_servers`); the
            credentials are created when the storage is formatted.
    """

    def __init__(
        self,
        properties: Mapping[str, object] | None = None,
        *,
        jvm_options: tuple[str, ...] = DEFAULT_JVM_OPTIONS,
        log_dir: str | os.PathLike[str] | None = None,
        ready_timeout: float = _READY_TIMEOUT_S,
        port: int | None = None,
        advertised_port: int | None = None,
        scram_users: Mapping[str, str] | None = None,
        tls: bool = False,
    ) -> None:
        if ready_timeout <= 0:
            raise ValueError(f"'ready_timeout' must be positive (got {ready_timeout!r}).")
        for name, value in (("port", port), ("advertised_port", advertised_port)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535
            ):
                raise ValueError(f"{name!r} must be a TCP port, 1 to 65535 (got {value!r}).")
        self._extra = dict(properties or {})
        self._jvm_options = tuple(jvm_options)
        self._owns_dir = log_dir is None
        self._dir = Path(log_dir) if log_dir is not None else None
        self._ready_timeout = ready_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._port = port or 0
        self._port_given = port is not None
        self._advertised_port = advertised_port
        self._controller_port = 0
        self._scram_users = dict(scram_users or {})
        for user, password in self._scram_users.items():
            if not (isinstance(user, str) and user.isidentifier() and isinstance(password, str)
                    and password and not set(password) & set(",=[]\"")):
                raise ValueError(
                    f"'scram_users' must map user names (letters, digits, _) to non-empty "
                    f"passwords without , = [ ] \" (got user {user!r})."
                )
        self._sasl_port = 0
        if not isinstance(tls, bool):
            raise ValueError(f"'tls' must be True or False (got {tls!r}).")
        self._tls_wanted = tls
        self._tls: TlsFiles | None = None  # a cluster's nodes share the cluster's
        self._tls_ports: dict[str, int] = {}
        # Drawn at the first format; a cluster's nodes share one (LocalKafkaCluster sets it).
        self._cluster_id: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the PLAINTEXT listener, for kafka-python's ``bootstrap_servers``.

        Known while the broker runs, and between :meth:`kill` and :meth:`restart` (the port
        stays the same); the advertised port when ``advertised_port`` is set."""
        if self._process is None:
            raise BrokerStartError("The broker is not running; call start() first.")
        return self._address("PLAINTEXT")

    @property
    def sasl_bootstrap_servers(self) -> str:
        """``host:port`` of the SASL_PLAINTEXT (SCRAM-SHA-512) listener of ``scram_users``."""
        if not self._scram_users:
            raise BrokerStartError("The broker has no SASL listener; pass scram_users=.")
        if self._process is None:
            raise BrokerStartError("The broker is not running; call start() first.")
        return f"127.0.0.1:{self._sasl_port}"

    @property
    def tls(self) -> TlsFiles:
        """The CA, client certificate and key of the TLS listeners (generated at start)."""
        if self._tls is None:
            raise BrokerStartError("The broker has no TLS listeners; pass tls=True and start it.")
        return self._tls

    def listener(self, name: str) -> str:
        """``host:port`` of a listener: ``PLAINTEXT``, ``SASL_PLAINTEXT`` (with
        ``scram_users``), ``SSL``, ``MTLS`` or ``SASL_SSL`` (with ``tls``)."""
        if name == "PLAINTEXT":
            return self.bootstrap_servers
        if name == "SASL_PLAINTEXT":
            return self.sasl_bootstrap_servers
        ports = self._tls_ports or dict.fromkeys(self._tls_names(), 0)
        if name not in ports:
            raise ValueError(
                f"'name' must be one of {['PLAINTEXT', 'SASL_PLAINTEXT', *ports]} for this "
                f"broker (got {name!r}).")
        if self._process is None:
            raise BrokerStartError("The broker is not running; call start() first.")
        return self._address(name)

    def _address(self, name: str) -> str:
        """``host:port`` of listener ``name``, running or not (a cluster lists stopped nodes)."""
        return f"127.0.0.1:{self._advertised(name, self._listener_ports()[name])}"

    def _listener_ports(self) -> dict[str, int]:
        """Every listener's own port by name (``CONTROLLER`` included)."""
        return {"PLAINTEXT": self._port, "CONTROLLER": self._controller_port,
                **({"SASL_PLAINTEXT": self._sasl_port} if self._scram_users else {}),
                **self._tls_ports}

    def _advertised(self, name: str, port: int) -> int:
        """The port that clients and other nodes are told to reach listener ``name`` on (a
        proxy's, on a cluster started with ``isolatable=True``)."""
        return (self._advertised_port or port) if name == "PLAINTEXT" else port

    def _tls_names(self) -> list[str]:
        if not self._tls_wanted:
            return []
        return [n for n in TLS_LISTENERS if n != "SASL_SSL" or self._scram_users]

    @property
    def port(self) -> int:
        """The PLAINTEXT listener's port (0 until the first start chose a free one)."""
        return self._port

    @property
    def pid(self) -> int | None:
        """Process id of the broker's JVM, or None when not running."""
        return self._process.pid if self._process is not None else None

    @property
    def log_file(self) -> Path:
        """The broker's ``server.log`` (INFO level)."""
        if self._dir is None:
            raise BrokerStartError("The broker has no log directory yet; call start() first.")
        return self._dir / "server.log"

    def start(self) -> LocalKafkaBroker:
        """Resolve the jars if needed, format storage, start the JVM and wait until it serves.

        A first start in a directory of its own whose JVM finds a port it chose taken (another
        process bound it between the choice and the JVM's bind: "Address already in use")
        draws new ports and starts again, up to twice; a port given, or a restart, is kept."""
        if self._process is not None:
            return self
        fresh = self._owns_dir and self._dir is None
        if self._port_given and self._dir is None:
            _check_port_free(self._port)
        tls = self._tls
        attempt = 0
        while True:
            self._launch()
            try:
                self._wait_ready()
                return self
            except BrokerStartError as exc:
                self.stop()
                if not (fresh and attempt < _PORT_RETRIES and _PORT_TAKEN in str(exc)):
                    raise
            except BaseException:
                self.stop()
                raise
            # stop() removed the directory, its formatted storage and any TLS files made in it.
            attempt += 1
            self._port = self._port if self._port_given else 0
            self._controller_port = self._sasl_port = 0
            self._tls_ports = {}
            self._tls = tls

    def _launch(self) -> None:
        """Format storage if fresh and start the JVM, without waiting for it to serve (a
        cluster's nodes can only serve once a majority of its controllers runs)."""
        java = _require_tool("java", "to run the Kafka broker (Java 17 or newer)")
        lib = broker_jars()
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="priority-kafka-broker-"))
        self._dir.mkdir(parents=True, exist_ok=True)
        self._choose_ports()
        if self._tls_wanted and self._tls is None:
            self._tls = generate_tls(self._dir / "tls")
        config = self._write_config()
        classpath = f"{lib}{os.sep}*"
        if not (self._dir / "data" / "meta.properties").exists():  # else: a restart
            self._format(java, classpath, config)
        log4j = self._dir / "log4j2.properties"
        log4j.write_text(_LOG4J2_CONFIG.format(log=self.log_file))
        with open(self._dir / "stdout.log", "wb") as stdout:
            self._process = launch(
                [java, *self._jvm_options, f"-Dlog4j2.configurationFile={log4j}",
                 "-cp", classpath, "kafka.Kafka", str(config)],
                stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        _RUNNING.add(self)

    def _choose_ports(self) -> None:
        # Chosen once: a restart reuses them (the formatted metadata names the controller's).
        self._port = self._port or _free_port()
        self._controller_port = self._controller_port or _free_port()
        if self._scram_users:
            self._sasl_port = self._sasl_port or _free_port()
        for name in self._tls_names():
            self._tls_ports[name] = self._tls_ports.get(name) or _free_port()

    def _quorum_format_args(self) -> tuple[str, ...]:
        # One node is its own quorum: formatted as the standalone controller.
        return ("--standalone",)

    def _format(self, java: str, classpath: str, config: Path) -> None:
        self._cluster_id = self._cluster_id or _cluster_id()
        formatted = subprocess.run(
            [java, *self._jvm_options, "-cp", classpath, "kafka.tools.StorageTool", "format",
             *self._quorum_format_args(), "-t", self._cluster_id, "-c", str(config),
             "--ignore-formatted",
             *(arg for user, password in self._scram_users.items()
               for arg in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]"))],
            capture_output=True, text=True, check=False,
        )
        if formatted.returncode != 0:
            output = (formatted.stdout + formatted.stderr).strip()
            for password in self._scram_users.values():
                output = output.replace(password, "***")
            raise BrokerStartError(
                f"Formatting the broker's storage in {self._dir} failed:\n{output}"
            )

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout``) and remove a temporary dir."""
        process, self._process = self._process, None
        _RUNNING.discard(self)
        if process is not None:
            self._terminate(process, timeout)
        if self._owns_dir and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def kill(self) -> None:
        """SIGKILL the broker without a clean shutdown, keeping its log dir (a crash, for tests).

        :meth:`restart` brings it back on the same ports with the same data."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def restart(self, *, kill: bool = False, down_s: float = 0.0) -> LocalKafkaBroker:
        """Stop the broker and start it again on the same ports and data directory.

        Args:
            kill: SIGKILL (a crash) instead of SIGTERM (a clean shutdown, which may take a few
                seconds while the broker hands off its partitions).
            down_s: seconds to stay down between the stop and the start.

        Clients keep their ``bootstrap_servers`` and reconnect on their own; records
        acknowledged before the stop are kept (after a SIGKILL, those the broker had written to
        its log; a producer with ``acks="all"`` and retries resends the rest). Returns once the
        broker answers metadata requests again.
        """
        if self._process is None or self._dir is None:
            raise BrokerStartError("The broker is not running; call start() first.")
        self._halt(kill=kill)
        if down_s > 0:
            time.sleep(down_s)
        return self.start()

    def _halt(self, *, kill: bool) -> None:
        """Stop the JVM (SIGKILL, or SIGTERM: a controlled shutdown) and keep its data."""
        if self._process is not None:
            if kill:
                self.kill()
            else:
                self._terminate(self._process)
        self._process = None
        _RUNNING.discard(self)

    @staticmethod
    def _terminate(process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> LocalKafkaBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"bootstrap_servers={self.bootstrap_servers!r}" if self._process else "stopped"
        return f"LocalKafkaBroker({state}, kafka={KAFKA_VERSION})"

    def _write_config(self) -> Path:
        config = self._dir_path / "server.properties"
        config.write_text(
            "".join(f"{key}={value}\n" for key, value in self._properties().items()))
        return config

    @property
    def _dir_path(self) -> Path:
        if self._dir is None:
            raise BrokerStartError("The broker has no log directory yet; call start() first.")
        return self._dir

    def _properties(self) -> dict[str, Any]:
        """The broker's ``server.properties``: its listeners, then single-node settings, then
        the caller's ``properties``."""
        ports = self._listener_ports()
        properties: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self._controller_port}",
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
            "advertised.listeners": ",".join(
                f"{n}://127.0.0.1:{self._advertised(n, p)}" for n, p in ports.items()),
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map":
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
                + "".join(f",{n}:{TLS_LISTENERS[n]}" for n in self._tls_ports),
            **({
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            } if self._scram_users else {}),
            **(tls_properties(self._tls, self._tls_ports) if self._tls is not None else {}),
            **({"listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(self._scram_users)}
               if "SASL_SSL" in self._tls_ports else {}),
            "log.dirs": self._dir_path / "data",
            "num.partitions": 1,
            # A single broker: every internal topic must live with one replica.
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            # A transaction open past its timeout is aborted within a second, not ten: what a
            # client does about it can be tested without a long wait.
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            # Tests start groups often; waiting for more members only slows them down.
            "group.initial.rebalance.delay.ms": 0,
            # Consumer-protocol (KIP-848) and share-group members learn of a new assignment at
            # their next heartbeat, which the broker paces (5 s by default): 0.5 s lets tests
            # and benchmarks see a member join or leave within a second.
            "group.consumer.min.heartbeat.interval.ms": 500,
            "group.consumer.heartbeat.interval.ms": 500,
            # A consumer-protocol member that dies holds its partitions for the group's session
            # timeout, which may not go below this minimum (45 s by default). 6 s, the classic
            # protocol's minimum, lets a group set `consumer.session.timeout.ms` as low as a
            # classic member may (benchmarks/churn.py does); the default stays 45 s.
            "group.consumer.min.session.timeout.ms": 6000,
            "group.share.min.heartbeat.interval.ms": 500,
            "group.share.heartbeat.interval.ms": 500,
            # Lets a test give a share group a lock of a second or two (15 s at the least by
            # default), to see a lock run out.
            "group.share.min.record.lock.duration.ms": 1000,
            **self._extra,
        }
        return properties

    def _wait_ready(self) -> None:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaConfigurationError, KafkaError

        assert self._process is not None
        deadline = time.monotonic() + self._ready_timeout
        last_error: Exception | None = None
        # Every wait below is bounded by the time left, and an answer that comes after the
        # deadline does not count: a broker slower than ready_timeout is reported, however
        # the client's own timeouts round.
        while (left_ms := int((deadline - time.monotonic()) * 1000)) > 0:
            if self._process.poll() is not None:
                raise BrokerStartError(
                    f"The Kafka broker exited with code {self._process.returncode} while "
                    f"starting.\n{self._log_tail()}"
                )
            # The client listener accepts connections only once the broker serves, so a plain
            # TCP connect is the cheap probe; a KafkaAdminClient that fails to bootstrap would
            # leave its IO thread behind on every attempt. The listener's own port: a proxy in
            # front of it accepts connections before the broker does.
            try:
                probe = socket.create_connection(("127.0.0.1", self._port),
                                                 min(1.0, left_ms / 1000))
                probe.close()
            except OSError as exc:
                last_error = exc
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                continue
            try:
                admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap_servers,
                    request_timeout_ms=min(5000, left_ms), bootstrap_timeout_ms=min(2000, left_ms),
                )
            except KafkaConfigurationError:
                raise
            except KafkaError as exc:
                last_error = exc
                continue
            try:
                admin.describe_cluster()
                if time.monotonic() <= deadline:
                    return
            except KafkaError as exc:
                last_error = exc
            finally:
                admin.close()
        raise BrokerStartError(
            f"The Kafka broker did not answer a metadata request within {self._ready_timeout:g}s "
            f"(last error: {last_error!r}).\n{self._log_tail()}"
        )

    def _log_tail(self) -> str:
        lines: list[str] = []
        for name in ("server.log", "stdout.log"):
            path = self._dir / name if self._dir is not None else None
            if path is not None and path.exists():
                tail = path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
                lines += [f"--- last lines of {path} ---", *tail]
        return "\n".join(lines) or "(the broker wrote no log)"


@contextlib.contextmanager
def local_kafka(
    properties: Mapping[str, object] | None = None, **options: object
) -> Iterator[LocalKafkaBroker]:
    """Start a :class:`LocalKafkaBroker` for the ``with`` block and stop it afterwards."""
    broker = LocalKafkaBroker(properties, **options)  # type: ignore[arg-type]
    with broker:
        yield broker
