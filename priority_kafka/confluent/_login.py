"""A refused SASL login or TLS handshake, told apart from one handshake cut short.

librdkafka retries a refused login for as long as the caller waits and tells only the
``error_cb`` why (a subscribed consumer's ``consume()`` returns nothing; a metadata call fails
after its whole timeout with a bare transport error). :class:`LoginWatch` is that callback; the
consumer and the Spark driver ask it, between their calls, whether to give up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

__all__ = ["LoginWatch"]

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


class LoginWatch:
    """Counts the authentication errors of each client since the last :meth:`clear`.

    Each client gets its own :meth:`error_cb`; every error is passed on to ``then`` (the
    caller's own ``error_cb``, if any).
    """

    __slots__ = ("_counts", "_then", "count", "last")

    def __init__(self, then: Callable[[KafkaError], Any] | None = None) -> None:
        self._then = then
        self._counts: list[int] = []
        self.count = 0  # of every client: zero on the hot path of a consumer that logged in
        self.last: KafkaError | None = None

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
            if then is not None:
                then(error)

        return seen

    def clear(self) -> None:
        """Forget the errors seen so far (the login worked, or a new call begins)."""
        self.count = 0
        self._counts = [0] * len(self._counts)

    def check(self) -> None:
        """Raise ``KafkaException`` with librdkafka's last authentication error (it names the
        mechanism and the broker's reason, never the password), or a TLS handshake's cause,
        once a login or handshake was refused."""
        if self.count >= _REFUSALS and max(self._counts) >= _REFUSALS:
            raise KafkaException(self.last)
