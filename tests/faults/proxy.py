"""A loopback TCP proxy that delays every chunk it forwards and drops all its connections on
demand: the slow, flaky network of the fault suite.

The broker must advertise the proxy's port (``LocalKafkaBroker(port=..., advertised_port=...)``)
so that clients reconnect through it after metadata tells them where the broker is.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading


class LossyProxy:
    """Forward ``127.0.0.1:listen_port`` to ``127.0.0.1:target_port``.

    Args:
        latency_s: delay before each chunk is forwarded (either direction; order is kept).
    """

    def __init__(self, listen_port: int, target_port: int, *, latency_s: float = 0.0) -> None:
        self.listen_port, self.target_port, self.latency_s = listen_port, target_port, latency_s
        self.drops = 0  # client connections aborted by abort_all()
        self.connections = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> LossyProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"the proxy could not listen on port {self.listen_port}")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> LossyProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.listen_port)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                "127.0.0.1", self.target_port
            )
        except OSError:  # the broker is down: refuse as it would
            writer.transport.abort()
            return
        self.connections += 1
        pair = {writer, upstream_writer}
        self._writers |= pair
        try:
            await asyncio.gather(
                self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer)
            )
        finally:
            self._writers -= pair

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                if self.latency_s:
                    await asyncio.sleep(self.latency_s)
                writer.write(data)
                await writer.drain()
        writer.transport.abort()  # one side closed: close the other, as a TCP hop would

    def abort_all(self) -> None:
        """Abort every open connection, both sides, as a network cut would (any thread)."""
        asyncio.run_coroutine_threadsafe(self._abort_all(), self._loop).result(10)

    async def _abort_all(self) -> None:
        self.drops += len(self._writers) // 2
        for writer in list(self._writers):
            writer.transport.abort()
