"""The loopback proxies of priority_kafka.testing._proxy, without Kafka: forwarding, and cuts by
destination (the node behind a listener) and by origin (the process a connection comes from),
"reject" and "drop", and healing."""

from __future__ import annotations

import os
import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from priority_kafka.testing._proxy import LossyProxy, ProxyLoop, local_ports_of


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(10)


@pytest.fixture
def proxies() -> Iterator[ProxyLoop]:
    loop = ProxyLoop("test-proxies").start()
    yield loop
    loop.stop()


def _echoes(sock: socket.socket, payload: bytes, timeout: float = 5.0) -> bool:
    """True if ``payload`` comes back within ``timeout`` s; False on a timeout or a reset."""
    sock.settimeout(timeout)
    try:
        sock.sendall(payload)
        return sock.recv(4096) == payload
    except (TimeoutError, ConnectionError):
        return False


def test_the_proxy_forwards_and_a_reject_cut_resets_and_refuses(
    echo_port: int, proxies: ProxyLoop
) -> None:
    port = proxies.listen(echo_port, node=1)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert _echoes(sock, b"hello")
        proxies.cut(1, "reject", None)
        assert not _echoes(sock, b"again")  # the open connection was reset
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert not _echoes(sock, b"new")  # a new one is refused
    proxies.heal([1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert _echoes(sock, b"healed")
    assert proxies.drops >= 2


def test_a_drop_cut_by_origin_holds_the_bytes_until_healed(
    echo_port: int, proxies: ProxyLoop
) -> None:
    """Connections from this process (cut as if it were node 2's, though they go to node 1)
    are held, the open one and a new one, and carry on once healed."""
    port = proxies.listen(echo_port, node=1)
    with socket.create_connection(("127.0.0.1", port)) as held:
        assert _echoes(held, b"before")
        assert held.getsockname()[1] in local_ports_of(os.getpid())
        proxies.cut(2, "drop", os.getpid())
        assert not _echoes(held, b"during", timeout=0.5)
        with socket.create_connection(("127.0.0.1", port)) as new:
            assert not _echoes(new, b"new", timeout=0.5)
            proxies.heal([2])
            assert new.recv(4096) == b"new"
        assert held.recv(4096) == b"during"


def test_a_cut_needs_a_known_kind(proxies: ProxyLoop) -> None:
    with pytest.raises(ValueError, match="'how' must be one of"):
        proxies.cut(1, "sever", None)  # type: ignore[arg-type]


def test_lossy_proxy_aborts_every_connection_on_demand(echo_port: int) -> None:
    with LossyProxy(0, echo_port, latency_s=0.01) as proxy, \
            socket.create_connection(("127.0.0.1", proxy.listen_port)) as sock:
        assert _echoes(sock, b"slow")
        proxy.abort_all()
        assert not _echoes(sock, b"cut") and proxy.drops == 1
