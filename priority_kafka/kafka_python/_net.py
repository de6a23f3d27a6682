"""The kafka-python connection edge: the network client of every kafka-python client this
library creates, and its translation of connection errors into ones that say what is wrong.

kafka-python retries a refused login, a refused connection, a failed TLS handshake and a
plaintext connection to a TLS listener until ``bootstrap_timeout_ms`` and then says only
"Unable to bootstrap"; :class:`AuthFailFastClient` raises each at once, naming its cause. Each
work-around sits behind a flag with the versions it was verified on and the test that proves
it (as in ``priority_kafka.kafka_python._kafka``, which re-exports these names).
"""

from __future__ import annotations

import errno
import functools
import re
import ssl
import time
from typing import Any

import kafka
from kafka.errors import (
    AuthorizationError,
    KafkaConnectionError,
    KafkaError,
    NodeNotReadyError,
    SaslAuthenticationFailedError,
    UnknownBrokerIdError,
)
from kafka.future import Future
from kafka.net import manager as _net_manager
from kafka.net.compat import KafkaNetClient
from kafka.net.manager import KafkaConnectionManager
from kafka.net.selector import NetworkSelector
from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport

from priority_kafka._connection import (
    REFUSED_FOR_S,
    refused_message,
    speaks_tls,
    tls_listener_message,
)

__all__ = [
    "AUTH_FAILURE_NOT_CACHED",
    "BOOTSTRAP_REFUSALS_RETRIED",
    "KAFKA_PYTHON_VERSION",
    "SEND_RAISES_UNKNOWN_NODE",
    "AuthFailFastClient",
    "ClusterUnreachableError",
    "TlsHandshakeError",
    "tls_failure",
]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


KAFKA_PYTHON_VERSION = _version(kafka.__version__)


#: A SASL authentication failure while bootstrapping is retried until ``bootstrap_timeout_ms``
#: and then reported as "Unable to bootstrap": the connection manager caches authentication
#: failures (``_auth_failures``, raised by ``get_connection``) only when ``_connect`` raises
#: one, and a connection's handshake reports it through the connection's future instead (and
#: ``_connect`` then clears the cache). So wrong credentials looked like an unreachable broker,
#: after 30 s by default. Clients this library creates (``with_client_defaults``) keep the
#: failure from that future and raise it, kafka-python's own ``SaslAuthenticationFailedError``
#: with the broker's reason, at the next connection attempt to that node. Verified on 3.0.12;
#: proof: tests/faults/test_sasl.py::
#: test_wrong_scram_password_fails_fast_without_showing_it.
AUTH_FAILURE_NOT_CACHED = KAFKA_PYTHON_VERSION >= (3, 0)

#: A refused connection to every bootstrap address is retried until ``bootstrap_timeout_ms``
#: (30 s) and reported as "Unable to bootstrap from ...", with no word of the refusals, and a
#: plaintext client on a TLS listener retries ``InvalidReceiveError: Invalid frame length:
#: 352518912`` (a TLS record's header read as a length) just as long; a KafkaConsumer whose
#: constructor failed so leaves its IO thread running. Clients this library creates raise
#: :class:`ClusterUnreachableError` once every bootstrap address has refused for
#: REFUSED_FOR_S, a :class:`TlsHandshakeError` naming the TLS listener at the first such
#: answer, and close the client whose construction failed. Verified on 3.0.12; proof:
#: tests/test_unreachable.py.
BOOTSTRAP_REFUSALS_RETRIED = KAFKA_PYTHON_VERSION >= (3, 0)

#: A request to a node the metadata no longer lists (a broker shut down or killed, still the
#: leader of a partition in the fetcher's view) raises UnknownBrokerIdError out of the
#: connection manager's ``send`` (it turns only NodeNotReadyError into a failed future), and so
#: out of ``poll()``: a kafka-python exactly-once member of the chaos soak died of it after a
#: node's controlled shutdown. Clients this library creates fail that request as a node not
#: ready, as Java's client treats a node missing from its metadata, and ask for fresh
#: metadata; the fetch is sent again to the new leader. Verified on 3.0.12; proof:
#: tests/test_kafka_client.py::test_a_request_to_a_node_gone_from_the_metadata_fails_retriably.
SEND_RAISES_UNKNOWN_NODE = KAFKA_PYTHON_VERSION >= (3, 0)


class _DeliverBeforeEofMixin:
    """A transport that hands the protocol the bytes read together with the peer's close.

    kafka-python 3.0.12 reads a socket until it would block and, when that pass ends at the
    peer's close, aborts with the error and drops the bytes read before it. A broker answers
    a failed SASL login and closes at once, so a client slow to wake (a loaded machine) found
    both waiting and lost the answer: it retried, each retry alike, 10-25 s before a wrong
    password was reported. The close is read again at the next pass."""

    def _sock_recv(self) -> tuple[bytes, Any]:
        data, error = super()._sock_recv()  # type: ignore[misc]
        if data and error is not None:
            return data, None
        return data, error


class _TcpTransport(_DeliverBeforeEofMixin, KafkaTCPTransport):
    pass


class _SslTransport(_DeliverBeforeEofMixin, KafkaSSLTransport):
    pass


class _AuthFailureCachingManager(KafkaConnectionManager):
    """Raises a connection's authentication or TLS failure at the next connection attempt to
    that node (see AUTH_FAILURE_NOT_CACHED); once, so fixed credentials are tried again later.
    Gives up bootstrapping once every bootstrap address refused (see
    BOOTSTRAP_REFUSALS_RETRIED)."""

    def __init__(self, *args: Any, **configs: Any) -> None:
        super().__init__(*args, **configs)
        self._rejected: dict[Any, BaseException] = {}
        # Bootstrap node -> when it first refused, since its last successful connection.
        self._refused: dict[Any, float] = {}

    def get_connection(self, node_id: Any, *args: Any, **kwargs: Any) -> Any:
        rejected = self._rejected.pop(node_id, None)
        if rejected is not None:
            raise rejected
        if node_id in self._refused:
            self._raise_if_unreachable()
        known = self._conns.get(node_id)
        conn = super().get_connection(node_id, *args, **kwargs)
        if conn is not known:
            conn.init_future.add_callback(lambda _: self._refused.pop(node_id, None))
            conn.init_future.add_errback(functools.partial(self._remember, node_id))
        return conn

    def send(self, request: Any, node_id: Any = None, request_timeout_ms: Any = None) -> Any:
        try:
            return super().send(request, node_id=node_id, request_timeout_ms=request_timeout_ms)
        except UnknownBrokerIdError:
            if not SEND_RAISES_UNKNOWN_NODE:
                raise
            self.cluster.request_update()
            return Future().failure(NodeNotReadyError(node_id))

    def _raise_if_unreachable(self) -> None:
        if not BOOTSTRAP_REFUSALS_RETRIED or self.bootstrapped:
            return
        brokers, refused = self.cluster.bootstrap_brokers(), self._refused
        if any(broker.node_id not in refused for broker in brokers):
            return
        if time.monotonic() - min(refused[broker.node_id] for broker in brokers) < REFUSED_FOR_S:
            return
        self._refused.clear()  # a later bootstrap tries them all again
        raise ClusterUnreachableError(refused_message(
            [f"{broker.host}:{broker.port}" for broker in brokers], "security_protocol"))

    def bootstrap(self, timeout_ms: Any = None, refresh: bool = True) -> None:
        # Only a client's constructor bootstraps before it knows the broker's version; its
        # failure leaves no client to close, so the IO thread it started is stopped here.
        constructing = self.broker_version_data is None and not self.bootstrapped
        try:
            super().bootstrap(timeout_ms, refresh)
        except BaseException:
            if constructing and BOOTSTRAP_REFUSALS_RETRIED:
                self.close()
                self._net.close()
            raise

    async def _build_transport(self, node: Any, timeout_at: Any = None) -> Any:
        # kafka-python's own, with the transports above.
        sock = await _net_manager.create_connection(
            self._net, node.host, node.port, self.config["socket_options"],
            proxy_url=self.config["proxy_url"], timeout_at=timeout_at,
        )
        transport: Any
        if self.ssl_enabled:
            ssl_configs = {k: v for k, v in self.config.items() if k.startswith("ssl_")}
            transport = _SslTransport(self._net, sock, host=node.host, **ssl_configs)
        else:
            transport = _TcpTransport(self._net, sock, host=node.host)
        try:
            await transport.handshake()
        except Exception as e:
            raise KafkaConnectionError(f"Handshake failed: {e}") from e
        return transport

    def _remember(self, node_id: Any, error: BaseException) -> None:
        if isinstance(error, (SaslAuthenticationFailedError, AuthorizationError)):
            self._rejected[node_id] = error
        node = self.cluster.broker_metadata(node_id)
        address = None if node is None else f"{node.host}:{node.port}"
        tls = tls_failure(error, address)
        if tls is not None:
            self._rejected[node_id] = tls
        elif _refused(error) and self.cluster.is_bootstrap(node_id):
            self._refused.setdefault(node_id, time.monotonic())


def _refused(error: BaseException) -> bool:
    """Whether a connection attempt failed because nothing listens at the address."""
    return isinstance(error, ConnectionRefusedError) or (
        isinstance(error, KafkaConnectionError)
        and errno.errorcode[errno.ECONNREFUSED] in str(error)
    )


class ClusterUnreachableError(KafkaError):
    """Every bootstrap address refused the connection (not retriable: kafka-python would retry
    until ``bootstrap_timeout_ms`` and raise only "Unable to bootstrap"); the message names the
    addresses and what to check."""

    retriable = False


class TlsHandshakeError(KafkaError):
    """A TLS handshake that cannot succeed as configured (not retriable: kafka-python would
    retry it until ``bootstrap_timeout_ms`` and raise only "Unable to bootstrap")."""

    retriable = False


# What the ssl module says (kafka-python passes its text on) -> the cause, in the caller's terms.
_TLS_CAUSES = (
    ("CERTIFICATE_VERIFY_FAILED", "the broker's certificate is not signed by a CA in "
     "ssl_cafile (wrong CA, or a broker certificate for another host)"),
    ("ALERT_CERTIFICATE_UNKNOWN", "the broker does not trust the client certificate "
     "(ssl_certfile is not signed by a CA in the broker's truststore)"),
    ("ALERT_BAD_CERTIFICATE", "the broker refused the client certificate (ssl_certfile)"),
    ("ALERT_HANDSHAKE_FAILURE", "the broker requires a client certificate (ssl_certfile, "
     "ssl_keyfile) or shares no cipher with the client"),
    ("PEM lib", "ssl_keyfile could not be read with ssl_password (a wrong key password, or "
     "a key that does not match ssl_certfile)"),
)


_FRAME_LENGTH = re.compile(r"Invalid frame length: (\d+)")


def tls_failure(error: BaseException, address: str | None = None) -> TlsHandshakeError | None:
    """A :class:`TlsHandshakeError` naming the cause when ``error`` is a TLS failure that no
    retry can mend (a certificate, CA or key password problem, or a plaintext connection to
    the TLS listener at ``address``); None otherwise."""
    text = str(error)
    length = _FRAME_LENGTH.search(text)
    if length is not None and speaks_tls(int(length.group(1))):
        return TlsHandshakeError(
            f"{tls_listener_message(address or 'the broker', 'security_protocol')} ({text})")
    if not (isinstance(error, ssl.SSLError) or "SSL" in text):
        return None
    for marker, cause in _TLS_CAUSES:
        if marker in text:
            return TlsHandshakeError(f"TLS handshake failed: {cause}. ({text})")
    return None


class AuthFailFastClient(KafkaNetClient):
    """kafka-python's network client, failing fast on rejected credentials (see
    AUTH_FAILURE_NOT_CACHED); a ``kafka_client`` for KafkaConsumer and KafkaProducer."""

    def __init__(self, net: Any = None, manager: Any = None, **configs: Any) -> None:
        if net is None:
            net = NetworkSelector(**configs)
        if manager is None:
            manager = _AuthFailureCachingManager(net, **configs)
        super().__init__(net=net, manager=manager, **configs)
