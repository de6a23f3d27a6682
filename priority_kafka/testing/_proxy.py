"""Loopback TCP proxies for network faults: a slow, flaky link (``LossyProxy``) and the links
of a :class:`~priority_kafka.testing.LocalKafkaCluster` whose nodes can be cut off.

A proxy only helps if everyone reaches the broker through it: the broker must *advertise* the
proxy's port (``LocalKafkaBroker(advertised_port=...)``; a cluster started with
``isolatable=True`` does this for every listener of every node, and its controller quorum's
voters are the proxies of the nodes' controller listeners), so clients and the other nodes
reconnect through it after metadata tells them where the broker is.

All proxies of one :class:`ProxyLoop` share one asyncio loop on one daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, Literal

__all__ = ["Cut", "LossyProxy", "ProxyLoop", "local_ports_of"]

#: What a cut link does: ``"drop"`` holds every byte and every new connection until it is
#: healed (packets dropped: requests hang until the client's own timeout, a connection that
#: survives the cut carries on); ``"reject"`` resets the open connections and refuses new
#: ones (a host that is down, or a firewall that rejects).
Cut = Literal["drop", "reject"]
CUTS: tuple[Cut, ...] = ("drop", "reject")


def local_ports_of(pid: int) -> set[int]:
    """The local ports of process ``pid``'s TCP sockets (Linux ``/proc``), the way a proxy on
    loopback tells which process a connection comes from (its peer port)."""
    if not sys.platform.startswith("linux"):
        raise NotImplementedError("Telling connections apart by process needs Linux /proc.")
    inodes: set[str] = set()
    fd_dir = f"/proc/{pid}/fd"
    with contextlib.suppress(OSError):  # the process is gone: it has no sockets
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                link = os.readlink(f"{fd_dir}/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            next(rows, None)
            for row in rows:
                fields = row.split()
                if len(fields) > 9 and fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class _Link:
    """One proxied connection: both ends, the client's port, the target node (if any) and the
    gate its bytes wait on while it is cut with ``"drop"``."""

    __slots__ = ("client", "flowing", "node", "peer_port", "upstream")

    def __init__(self, client: asyncio.StreamWriter, node: int | None) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        peer = client.get_extra_info("peername")
        self.peer_port: int = peer[1] if peer else -1
        self.node = node
        self.flowing = asyncio.Event()
        self.flowing.set()

    def abort(self) -> None:
        self.client.transport.abort()
        if self.upstream is not None:
            self.upstream.transport.abort()


#: How long a cut, heal or listen may wait for the proxies' loop.
_CALL_TIMEOUT_S = 60.0


class ProxyLoop:
    """One asyncio loop on a daemon thread serving any number of forwarding listeners.

    Each listener forwards ``127.0.0.1:<its port>`` to ``127.0.0.1:<target_port>``, delaying
    every chunk by ``latency_s`` (order kept). :meth:`cut` cuts the links of chosen nodes, by
    where they go (the listeners of a node) and where they come from (a node's process).
    """

    def __init__(self, name: str = "proxy") -> None:
        self._name = name
        self._loop = asyncio.new_event_loop()
        self._loop.close()  # a closed placeholder: the real loop is made by start()
        self._thread: threading.Thread | None = None
        self._links: set[_Link] = set()
        self._servers: list[asyncio.AbstractServer] = []
        #: node -> (how it is cut, its process id then): links to it or from it are cut.
        self._cut: dict[int, tuple[Cut, int | None]] = {}
        self.connections = 0
        self.drops = 0  # connections aborted by abort_all() or a "reject" cut

    def start(self) -> ProxyLoop:
        """Start the loop's thread (once; a stopped loop is not started again)."""
        if self._thread is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the loop: every listener closes and every connection is aborted."""
        if self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            for server in self._servers:
                server.close()
            for link in list(self._links):
                link.abort()
            # Connections still being forwarded (or held by a cut) end here, not at exit.
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    def _call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        if self._thread is None or not self._thread.is_alive():
            coroutine.close()
            raise RuntimeError("The proxy loop is not running; call start() first.")
        # The loop forwards every proxied byte of the cluster in Python: at load 40 it was seen
        # to take over 10 s to get to a cut or a heal.
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(_CALL_TIMEOUT_S)

    def listen(
        self, target_port: int, listen_port: int = 0, *, latency_s: float = 0.0,
        node: int | None = None,
    ) -> int:
        """Start forwarding a new listener (``listen_port``, 0 for a free one) to
        ``target_port``; ``node`` names the target for :meth:`cut`. Returns the listener's port.
        """
        if latency_s < 0:
            raise ValueError(f"'latency_s' must be >= 0 (got {latency_s!r}).")
        return int(self._call(self._listen(target_port, listen_port, latency_s, node)))

    async def _listen(
        self, target_port: int, listen_port: int, latency_s: float, node: int | None
    ) -> int:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._forward(reader, writer, target_port, latency_s, node)

        server = await asyncio.start_server(accept, "127.0.0.1", listen_port)
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def _forward(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target_port: int,
        latency_s: float, node: int | None,
    ) -> None:
        link = _Link(writer, node)
        cut = self._cut_of(link, self._origins())
        if cut == "reject":
            self.drops += 1
            writer.transport.abort()
            return
        self._links.add(link)
        try:
            if cut == "drop":  # held until healed, then connected as if the SYN got through
                link.flowing.clear()
                await link.flowing.wait()
            try:
                upstream_reader, link.upstream = await asyncio.open_connection(
                    "127.0.0.1", target_port
                )
            except OSError:  # the broker is down: refuse as it would
                writer.transport.abort()
                return
            self.connections += 1
            await asyncio.gather(
                self._pipe(reader, link.upstream, link, latency_s),
                self._pipe(upstream_reader, writer, link, latency_s),
            )
        finally:
            self._links.discard(link)

    @staticmethod
    async def _pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link, latency_s: float
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                if latency_s:
                    await asyncio.sleep(latency_s)
                await link.flowing.wait()  # a "drop" cut holds the bytes here
                writer.write(data)
                await writer.drain()
        link.abort()  # one side closed: close the other, as a TCP hop would

    def _origins(self) -> dict[int, set[int]]:
        """Per cut node, the local ports of its process's sockets (empty when it has none)."""
        return {node: local_ports_of(pid) if pid is not None else set()
                for node, (_, pid) in self._cut.items()}

    def _cut_of(self, link: _Link, origins: dict[int, set[int]]) -> Cut | None:
        if link.node in self._cut:
            return self._cut[link.node][0]
        for node, ports in origins.items():
            if link.peer_port in ports:
                return self._cut[node][0]
        return None

    def cut(self, node: int, how: Cut, pid: int | None) -> None:
        """Cut every link to ``node``'s listeners and from its process ``pid`` (any thread)."""
        if how not in CUTS:
            raise ValueError(f"'how' must be one of {list(CUTS)} (got {how!r}).")
        self._call(self._apply_cut(node, how, pid))

    async def _apply_cut(self, node: int, how: Cut, pid: int | None) -> None:
        self._cut[node] = (how, pid)
        origins = self._origins()
        for link in list(self._links):
            cut = self._cut_of(link, origins)
            if cut == "reject":
                self.drops += 1
                link.abort()
            elif cut == "drop":
                link.flowing.clear()

    def heal(self, nodes: Iterable[int]) -> None:
        """Undo the cuts of ``nodes``: held bytes and connections go on (any thread)."""
        self._call(self._heal(set(nodes)))

    async def _heal(self, nodes: set[int]) -> None:
        for node in nodes:
            self._cut.pop(node, None)
        origins = self._origins()
        for link in self._links:
            if self._cut_of(link, origins) is None:
                link.flowing.set()

    def abort_all(self) -> None:
        """Abort every open connection, both sides, as a network cut would (any thread)."""
        self._call(self._abort_all())

    async def _abort_all(self) -> None:
        self.drops += len(self._links)
        for link in list(self._links):
            link.abort()


class LossyProxy:
    """Forward ``127.0.0.1:listen_port`` to ``127.0.0.1:target_port`` on a loop of its own.

    Args:
        latency_s: delay before each chunk is forwarded (either direction; order is kept).
    """

    def __init__(self, listen_port: int, target_port: int, *, latency_s: float = 0.0) -> None:
        self.listen_port, self.target_port, self.latency_s = listen_port, target_port, latency_s
        self._loop = ProxyLoop("lossy-proxy")

    @property
    def drops(self) -> int:
        """Client connections aborted by :meth:`abort_all`."""
        return self._loop.drops

    @property
    def connections(self) -> int:
        return self._loop.connections

    def start(self) -> LossyProxy:
        self._loop.start()
        try:
            self.listen_port = self._loop.listen(
                self.target_port, self.listen_port, latency_s=self.latency_s
            )
        except OSError as exc:
            self._loop.stop()
            raise RuntimeError(f"the proxy could not listen on port {self.listen_port}") from exc
        return self

    def stop(self) -> None:
        self._loop.stop()

    def __enter__(self) -> LossyProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def abort_all(self) -> None:
        """Abort every open connection, both sides, as a network cut would (any thread)."""
        self._loop.abort_all()
