"""A certificate authority and certificates generated at start, for the local brokers' TLS.

Needs the ``cryptography`` package (``pip install priority-kafka[tls]``). Every file is PEM, the
format both client families read: kafka-python's ``ssl_cafile``/``ssl_certfile``/``ssl_keyfile``
and librdkafka's ``ssl.ca.location``/``ssl.certificate.location``/``ssl.key.location``.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from pathlib import Path
from typing import Any

import attrs

from priority_kafka.errors import BrokerStartError

__all__ = ["TLS_LISTENERS", "TlsFiles", "generate_tls", "plain_jaas", "tls_properties"]

_VALID_DAYS = 7  # a test's certificates; long enough for any session, short if one leaks


@attrs.frozen
class TlsFiles:
    """The PEM files of a local TLS setup: a CA, the brokers' certificate and a client's.

    ``client_key_file`` is encrypted with ``client_key_password``, which no repr shows.
    ``server_chain`` and ``server_key`` are the brokers' certificate chain and (unencrypted)
    key, as the inline PEM values Kafka's ``ssl.keystore.certificate.chain`` and
    ``ssl.keystore.key`` take.
    """

    ca_file: Path
    client_cert_file: Path
    client_key_file: Path
    client_key_password: str = attrs.field(repr=False)
    server_chain: str = attrs.field(repr=False)
    server_key: str = attrs.field(repr=False)


def generate_tls(
    directory: str | Path, *, common_name: str = "priority-kafka local CA"
) -> TlsFiles:
    """Create a CA, a broker certificate for ``127.0.0.1``/``localhost`` and a client
    certificate (CN ``client``, key encrypted with a random password) in ``directory``.

    Each call makes a new CA, so two calls give two CAs that do not trust each other (what a
    test of a wrong CA or an untrusted client certificate needs).
    """
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError as exc:
        raise BrokerStartError(
            "TLS for the local broker needs the 'cryptography' package: "
            "pip install 'priority-kafka[tls]'."
        ) from exc
    if not isinstance(common_name, str) or not common_name:
        raise ValueError(f"'common_name' must be a non-empty str (got {common_name!r}).")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> Any:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def certificate(subject: str, key: Any, issuer: str, issuer_key: Any, *, ca: bool,
                    extensions: tuple[Any, ...] = ()) -> Any:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject)).issuer_name(name(issuer))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        for extension in extensions:
            builder = builder.add_extension(extension, critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    def pem(cert: Any) -> str:
        return str(cert.public_bytes(serialization.Encoding.PEM).decode())

    # P-256 keys: generated in microseconds, read by Java, Python's ssl and OpenSSL alike.
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificate(common_name, ca_key, common_name, ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = certificate(
        "localhost", server_key, common_name, ca_key, ca=False,
        extensions=(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),),
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = certificate("client", client_key, common_name, ca_key, ca=False)
    password = secrets.token_urlsafe(18)

    ca_file = directory / "ca.pem"
    ca_file.write_text(pem(ca))
    client_cert_file = directory / "client.pem"
    client_cert_file.write_text(pem(client))
    client_key_file = directory / "client.key"
    client_key_file.write_bytes(client_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode())))
    client_key_file.chmod(0o600)
    return TlsFiles(
        ca_file=ca_file, client_cert_file=client_cert_file, client_key_file=client_key_file,
        client_key_password=password, server_chain=pem(server) + pem(ca),
        server_key=server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()).decode(),
    )


#: The TLS listeners a local broker with ``tls=True`` adds, and their security protocols.
TLS_LISTENERS = {"SSL": "SSL", "MTLS": "SSL", "SASL_SSL": "SASL_SSL"}


def _inline(pem: str) -> str:
    # A server.properties value on one line: java.util.Properties reads \n back as a newline.
    return pem.strip().replace("\n", "\\n")


def tls_properties(tls: TlsFiles, ports: dict[str, int]) -> dict[str, object]:
    """``server.properties`` entries for the TLS listeners in ``ports`` (name -> port): the
    brokers' PEM key and chain inline, the CA as the truststore, client certificates
    required on ``MTLS``, SCRAM-SHA-512 and PLAIN on ``SASL_SSL`` (for ``scram_users``)."""
    properties: dict[str, object] = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": _inline(tls.server_chain),
        "ssl.keystore.key": _inline(tls.server_key),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": tls.ca_file,
        "listener.name.mtls.ssl.client.auth": "required",
    }
    if "SASL_SSL" in ports:
        properties.update({
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        })
    return properties


def plain_jaas(users: dict[str, str]) -> str:
    """The PLAIN login module's JAAS entry listing ``users`` (name -> password)."""
    entries = "".join(f' user_{user}="{password}"' for user, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required{entries};"
