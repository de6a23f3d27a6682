"""What to say when the cluster cannot be reached: the words both client families use.

Pure text: the client edges (``priority_kafka.kafka_python._kafka`` for kafka-python,
``priority_kafka.confluent._login`` for librdkafka) decide that an address refused every
connection or answered in TLS, and say so with these, in their own setting names.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["REFUSED_FOR_S", "refused_message", "speaks_tls", "tls_listener_message"]

#: How long every bootstrap address must have refused before the client gives up: a broker
#: whose port opens again within it (the end of a restart) is still reached; any longer and a
#: mistyped address takes that long to report.
REFUSED_FOR_S = 1.0

# A plaintext client reads the first 4 bytes of a TLS record as a frame length: content type
# 0x15 (alert) or 0x16 (handshake), then major version 3 (SSL 3.0 to TLS 1.3).
_TLS_RECORD_PREFIXES = (0x1503, 0x1603)


def speaks_tls(frame_length: int) -> bool:
    """Whether a response "frame length" is in fact the header of a TLS record."""
    return frame_length >> 16 in _TLS_RECORD_PREFIXES


def refused_message(addresses: Sequence[str], protocol_setting: str) -> str:
    """The error of a client whose every bootstrap address refused the connection."""
    which = "the bootstrap address" if len(addresses) == 1 else "every bootstrap address"
    return (
        f"Cannot reach the Kafka cluster: {which} refused the connection "
        f"({', '.join(addresses)}). Check that a broker is running there and listening on "
        f"that port (the port of one of its listeners), that the address is the one in the "
        f"broker's advertised.listeners, and that {protocol_setting} matches that listener."
    )


def tls_listener_message(address: str, protocol_setting: str) -> str:
    """The error of a plaintext client connected to a TLS listener."""
    return (
        f"The listener at {address} speaks TLS but this client connects in plaintext: set "
        f"{protocol_setting}=SSL (SASL_SSL with SASL), with the CA that signed the broker's "
        f"certificate, or use the broker's PLAINTEXT listener."
    )
