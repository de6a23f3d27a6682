"""A loopback proxy that can answer a chosen client's Metadata request with no brokers.

A Kafka node that is shutting down (fenced, its socket server still up) answers Metadata with
every topic and no broker, and librdkafka (2.10 and later) then drops every broker it knows; if
its re-bootstrap loses a race (or ``metadata.recovery.strategy`` is ``none``) the handle never
dials again (librdkafka issue #5301). The proxy makes that answer on demand: it reads the
Kafka frames both ways, remembers each request's API and client id by correlation id, and
empties the broker list of the next Metadata responses of the clients it is told about.

The broker must advertise the proxy's port, so every connection goes through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from typing import Any

__all__ = ["BlankMetadataProxy"]

_METADATA = 3  # Kafka's API key of Metadata
_FLEXIBLE_FROM = 9  # Metadata versions from 9 use compact arrays, strings and tagged fields


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _skip_tagged(data: bytes, at: int) -> int:
    count, at = _uvarint(data, at)
    for _ in range(count):
        _, at = _uvarint(data, at)
        size, at = _uvarint(data, at)
        at += size
    return at


def _skip_string(data: bytes, at: int, flexible: bool) -> int:
    if flexible:
        length, at = _uvarint(data, at)
        return at + max(length - 1, 0)
    (length,) = struct.unpack_from(">h", data, at)
    return at + 2 + max(length, 0)


def without_brokers(response: bytes, version: int) -> bytes:
    """A Metadata response (without its size prefix, from its correlation id on) with an empty
    broker list, everything else as it was."""
    flexible = version >= _FLEXIBLE_FROM
    at = 4  # correlation id
    if flexible:
        at = _skip_tagged(response, at)  # response header v1
    if version >= 3:
        at += 4  # throttle_time_ms
    start = at
    if flexible:
        count, at = _uvarint(response, at)
        count -= 1
    else:
        (count,) = struct.unpack_from(">i", response, at)
        at += 4
    for _ in range(max(count, 0)):
        at += 4  # node id
        at = _skip_string(response, at, flexible)  # host
        at += 4  # port
        if version >= 1:
            at = _skip_string(response, at, flexible)  # rack
        if flexible:
            at = _skip_tagged(response, at)
    empty = b"\x01" if flexible else b"\x00\x00\x00\x00"
    return response[:start] + empty + response[at:]


class BlankMetadataProxy:
    """Forward ``127.0.0.1:<port>`` to ``127.0.0.1:target_port``; :meth:`blank` empties the
    broker list of the next Metadata responses to a client id. Any thread may call it."""

    def __init__(self, target_port: int, port: int = 0) -> None:
        self.target_port, self.port = target_port, port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="blank-metadata",
                                        daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._lock = threading.Lock()
        self._to_blank: dict[str, int] = {}
        #: Responses emptied so far, per client id.
        self.blanked: dict[str, int] = {}

    def start(self) -> BlankMetadataProxy:
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def __enter__(self) -> BlankMetadataProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def blank(self, client_id: str, responses: int = 1) -> None:
        """Empty the broker list of the next ``responses`` Metadata responses to ``client_id``."""
        with self._lock:
            self._to_blank[client_id] = self._to_blank.get(client_id, 0) + responses

    def _take(self, client_id: str) -> bool:
        with self._lock:
            left = self._to_blank.get(client_id, 0)
            if not left:
                return False
            self._to_blank[client_id] = left - 1
            self.blanked[client_id] = self.blanked.get(client_id, 0) + 1
            return True

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:  # the broker is down: refuse as it would
            writer.transport.abort()
            self._writers.discard(writer)
            return
        self._writers.add(up_writer)
        asked: dict[int, tuple[int, int, str]] = {}  # correlation id -> api, version, client
        try:
            await asyncio.gather(self._requests(reader, up_writer, asked),
                                 self._responses(up_reader, writer, asked))
        finally:
            for end in (writer, up_writer):
                end.transport.abort()
                self._writers.discard(end)

    @staticmethod
    async def _frames(reader: asyncio.StreamReader) -> Any:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                yield await reader.readexactly(size)

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        asked: dict[int, tuple[int, int, str]]) -> None:
        async for frame in self._frames(reader):
            api, version, correlation, length = struct.unpack_from(">hhih", frame)
            client = frame[10:10 + length].decode() if length > 0 else ""
            asked[correlation] = (api, version, client)
            writer.write(struct.pack(">i", len(frame)) + frame)
            await writer.drain()
        writer.transport.abort()

    async def _responses(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         asked: dict[int, tuple[int, int, str]]) -> None:
        async for frame in self._frames(reader):
            (correlation,) = struct.unpack_from(">i", frame)
            api, version, client = asked.pop(correlation, (-1, 0, ""))
            if api == _METADATA and self._take(client):
                frame = without_brokers(frame, version)
            writer.write(struct.pack(">i", len(frame)) + frame)
            await writer.drain()
        writer.transport.abort()
