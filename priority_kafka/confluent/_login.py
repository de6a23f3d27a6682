"""A refused SASL login or TLS handshake, or a cluster that cannot be reached, told apart
from one handshake cut short.

librdkafka retries a refused login, a refused connection and a plaintext connection to a TLS
listener for as long as the caller waits and tells only the ``error_cb`` and its log why (a
subscribed consumer's ``consume()`` returns nothing; a metadata call fails after its whole
timeout with a bare transport error), each client logging every attempt. :class:`LoginWatch`
is that callback and that log (folded: one line per address and kind); the consumer, the
producer and the Spark driver ask it, between their calls, whether to give up.
"""

from __future__ import annotations

import logging
import re
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from priority_kafka._connection import REFUSED_FOR_S, refused_message, tls_listener_message

__all__ = ["LoginWatch"]

_LOG = logging.getLogger("priority_kafka.librdkafka")
# "host:port/bootstrap: ..." (an address of bootstrap.servers) or "host:port/1: ..." (a broker
# the cluster's metadata named: the cluster was reached).
_BROKER = re.compile(r"^(?:\[thrd:[^\]]*\]: )?(?P<address>\S+)/(?P<id>bootstrap|\d+): ")
# "(after 12ms in state CONNECT, 3 identical error(s) suppressed)": the same line again.
_ATTEMPT = re.compile(
    r" \(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)$")
# A plaintext client's first request to a TLS listener: the broker closes without an answer.
_CLOSED_AT_HELLO = "in state APIVERSION_QUERY"
_TLS_PROBE_S = 1.0
_FOLDED_KINDS = 1000  # distinct log lines remembered; forgotten all at once beyond

# Authentication errors of one client before its login counts as refused: one can be a
# connection cut during the handshake (librdkafka reconnects); a wrong password fails every
# connection attempt. Per client, as several (a consumer per level) fail at once when a broker
# restarts.
_REFUSALS = 2

# TLS failures librdkafka reports (as _SSL or _TRANSPORT) that no retry mends -> the cause in
# the caller's settings. A wrong ssl.key.password fails in the constructor already.
_TLS_CAUSES = (
    ("certificate verify failed", "the broker's certificate is not signed by a CA in "
     "ssl.ca.location (wrong CA, or a broker certificate for another host)"),
    ("alert certificate unknown", "the broker does not trust the client certificate "
     "(ssl.certificate.location is not signed by a CA in the broker's truststore)"),
    ("alert bad certificate", "the broker refused the client certificate "
     "(ssl.certificate.location)"),
    ("alert handshake failure", "the broker requires a client certificate "
     "(ssl.certificate.location, ssl.key.location) or shares no cipher with the client"),
)


def _refusal(error: KafkaError) -> KafkaError | None:
    """``error`` when it refuses the login for good, a TLS one restated with its cause."""
    if error.code() == KafkaError._AUTHENTICATION:
        return error
    if error.code() in (KafkaError._SSL, KafkaError._TRANSPORT):
        for marker, cause in _TLS_CAUSES:
            if marker in error.str():
                return KafkaError(KafkaError._SSL,
                                  f"TLS handshake failed: {cause}. ({error.str()})")
    return None


def _address(server: str) -> str:
    """A ``bootstrap.servers`` entry as librdkafka names its broker (port 9092 by default)."""
    server = server.strip().rpartition("://")[2]
    return server if re.search(r":\d+$", server) else f"{server}:9092"


def _speaks_tls(address: str) -> bool:
    """Whether ``address`` completes (or answers with an alert) a TLS handshake."""
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host.strip("[]"), int(port)), _TLS_PROBE_S) as sock:
            sock.settimeout(_TLS_PROBE_S)
            with context.wrap_socket(sock):
                return True
    except ssl.SSLError as exc:
        return "ALERT" in str(exc)
    except (OSError, ValueError):
        return False


class LoginWatch:
    """Counts the authentication errors of each client since the last :meth:`clear`, and
    watches whether the cluster can be reached at all.

    Each client gets its own :meth:`error_cb` and shares :attr:`logger`; every error is passed
    on to ``then`` (the caller's own ``error_cb``, if any). ``config`` (librdkafka properties)
    gives the bootstrap addresses, the security protocol and the caller's ``logger``, to which
    the folded log goes (else to the ``priority_kafka.librdkafka`` logger).
    """

    __slots__ = ("_bootstrap", "_counts", "_hello_closed", "_logged", "_plaintext",
                 "_probed", "_reached", "_refused", "_target", "_then", "count", "last",
                 "unreachable")

    @classmethod
    def of(cls, librdkafka: dict[str, Any]) -> LoginWatch:
        """The watch of a client about to be made of ``librdkafka`` (its properties), passing
        errors on to its ``error_cb`` (refused unless callable, as librdkafka does); it
        becomes their ``logger``, folding librdkafka's lines to the caller's own logger."""
        error_cb = librdkafka.get("error_cb")
        if error_cb is not None and not callable(error_cb):
            raise TypeError(f"expected error_cb property as a callable function (got {error_cb!r})")
        watch = cls(error_cb, librdkafka)
        librdkafka["logger"] = watch.logger
        return watch

    def __init__(self, then: Callable[[KafkaError], Any] | None = None,
                 config: Mapping[str, Any] | None = None) -> None:
        self._then = then
        self._counts: list[int] = []
        self.count = 0  # of every client: zero on the hot path of a consumer that logged in
        self.last: KafkaError | None = None
        config = config or {}
        servers = config.get("bootstrap.servers") or ""
        self._bootstrap = [_address(s) for s in str(servers).split(",") if s.strip()]
        self._plaintext = str(config.get("security.protocol", "plaintext")).lower() in (
            "plaintext", "sasl_plaintext")
        self._target = config.get("logger") or _LOG
        self._refused: dict[str, float] = {}  # bootstrap address -> its first refusal
        self._hello_closed: set[str] = set()  # addresses that closed before any answer
        self._probed: set[str] = set()
        self._reached = False  # a broker of the cluster's metadata was named: never unreachable
        self._logged: set[tuple[str, str]] = set()  # (facility, line) logged once
        #: The error that says the cluster cannot be reached, once known (then every client
        #: of the caller is closed).
        self.unreachable: KafkaException | None = None

    @property
    def logger(self) -> LoginWatch:
        """The clients' ``logger``: itself (its :meth:`log`)."""
        return self

    def log(self, level: int, fmt: str, *args: Any) -> None:
        """librdkafka's log line (``"%s [%s] %s"``, facility, client, text): the first of each
        address and kind goes on, at its level, each repeat at DEBUG only."""
        facility, text = (args[0], args[-1]) if len(args) == 3 else ("", fmt % args)
        broker = _BROKER.match(text)
        if broker is not None:
            self._broker_seen(broker, text)
        kind = (facility, _ATTEMPT.sub("", text))
        if kind not in self._logged:
            if len(self._logged) >= _FOLDED_KINDS:
                self._logged.clear()
            self._logged.add(kind)
            self._target.log(level, fmt, *args)
        else:
            self._target.log(logging.DEBUG, fmt + " (repeated, folded)", *args)

    def _broker_seen(self, broker: re.Match[str], text: str) -> None:
        if broker["id"] != "bootstrap":
            self._reached = True
        elif _CLOSED_AT_HELLO in text and "Disconnected" in text:
            address = broker["address"]
            self._hello_closed.add(address)
            self.count += 1  # check() looks

    def error_cb(self) -> Callable[[KafkaError], None]:
        """A new client's ``error_cb``."""
        client = len(self._counts)
        self._counts.append(0)
        then = self._then

        def seen(error: KafkaError) -> None:
            refusal = _refusal(error)
            if refusal is not None:
                self._counts[client] += 1
                self.count += 1
                self.last = refusal
            elif error.code() == KafkaError._TRANSPORT:
                self._transport_error(error.str())
            if then is not None:
                then(error)

        return seen

    def _transport_error(self, text: str) -> None:
        broker = _BROKER.match(text)
        if broker is None:
            return
        if broker["id"] != "bootstrap":
            self._reached = True
        elif "Connection refused" in text:
            self._refused.setdefault(broker["address"], time.monotonic())
            self.count += 1  # check() looks

    def clear(self) -> None:
        """Forget the errors seen so far (the login worked, or a new call begins)."""
        self.count = 0
        self._counts = [0] * len(self._counts)
        self._refused.clear()

    def check(self) -> None:
        """Raise ``KafkaException`` with librdkafka's last authentication error (it names the
        mechanism and the broker's reason, never the password), or a TLS handshake's cause,
        once a login or handshake was refused; or one naming the addresses and what to check
        (setting :attr:`unreachable`) once every bootstrap address refused for a second
        before the cluster was ever reached, or a bootstrap address turned out to be a TLS
        listener this plaintext client talked to."""
        if self.unreachable is not None:
            raise self.unreachable
        if self._counts and self.count >= _REFUSALS and max(self._counts) >= _REFUSALS:
            raise KafkaException(self.last)
        if self._reached:
            return
        if self._plaintext:
            self._check_tls_listeners()
        refused = self._refused
        if not self._bootstrap or any(a not in refused for a in self._bootstrap):
            return
        if time.monotonic() - min(refused[a] for a in self._bootstrap) >= REFUSED_FOR_S:
            self._give_up(KafkaError._TRANSPORT,
                          refused_message(self._bootstrap, "security.protocol"))

    def _check_tls_listeners(self) -> None:
        # One close is enough to ask: the probe itself tells a TLS listener from a broker
        # that went away.
        for address in list(self._hello_closed):
            if address not in self._probed:
                self._probed.add(address)
                if _speaks_tls(address):
                    self._give_up(KafkaError._SSL,
                                  tls_listener_message(address, "security.protocol"))

    def _give_up(self, code: int, message: str) -> None:
        self.unreachable = KafkaException(KafkaError(code, message, fatal=False))
        raise self.unreachable
