"""A rate-limited HTTP downstream on loopback, in a process of its own, for the budgets benchmark.

It answers ``GET /call`` with 200 while its token bucket (``limit`` tokens a second, holding
``burst_s`` seconds of them, at least 1: by default 50 ms, so a client spending more than the
rate is refused within 50 ms) has a token, else 429 with ``Retry-After`` (one token interval).
So at most ``limit x (W + burst_s)`` calls are accepted in any ``W`` seconds: with the default,
no 1 s window can hold more than 1.05 x the limit whatever the client does; a longer
``burst_s`` (a gateway counting per second) lets a client's excess show. ``GET /outage?s=X``
makes it refuse every call for the next ``X`` seconds (``Retry-After``: what is left of the
outage), as a gateway shedding load for a moment would. An accepted call's body is the time it
was accepted (``time.monotonic()``, which on Linux is ``time.perf_counter()`` of every process
too); ``service_s`` is how long it then takes to answer (the work behind the call, a thread
per connection). ``GET /stats`` gives the accepted
calls' times (its monotonic clock, which on Linux is the caller's too) and the count of 429s.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlparse

__all__ = ["Downstream", "call"]


def _serve(limit: float, burst_s: float, service_s: float, port_out: Any, stop: Any) -> None:
    """The downstream's process: serve until ``stop`` is set."""
    lock = threading.Lock()
    capacity = max(1.0, limit * burst_s)
    state = {"tokens": capacity, "at": time.monotonic(), "refuse_until": 0.0}
    accepted: list[float] = []
    refused = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body are two writes: with Nagle on, the body waits for the client's
        # delayed ACK (40 ms), which no real gateway adds to every call.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path == "/stats":
                with lock:
                    body = json.dumps([accepted, refused[0]]).encode()
                self._answer(200, body)
                return
            now = time.monotonic()
            if url.path == "/outage":
                with lock:
                    state["refuse_until"] = now + float(parse_qs(url.query)["s"][0])
                self._answer(200, b"ok")
                return
            with lock:
                state["tokens"] = min(capacity, state["tokens"] + (now - state["at"]) * limit)
                state["at"] = now
                outage = state["refuse_until"] - now
                ok = outage <= 0 and state["tokens"] >= 1
                if ok:
                    state["tokens"] -= 1
                    accepted.append(now)
                else:
                    refused[0] += 1
            retry_after = None if ok else f"{max(outage, 1 / limit):.3f}"
            if ok and service_s:
                time.sleep(service_s)  # the work behind an accepted call (its own thread)
            # An accepted call's body is the time the downstream accepted it (its clock).
            self._answer(200 if ok else 429, repr(now).encode() if ok else b"slow down",
                         retry_after)

        def _answer(self, status: int, body: bytes, retry_after: str | None = None) -> None:
            self.send_response(status)
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_out.send(server.server_address[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop.wait()
    server.shutdown()


def call(port: int, path: str, connection: http.client.HTTPConnection | None = None
         ) -> tuple[int, float | None, bytes]:
    """GET ``path`` (on ``connection`` if given, kept alive): status, Retry-After, body."""
    connection = connection or http.client.HTTPConnection("127.0.0.1", port)
    connection.request("GET", path)
    answer = connection.getresponse()
    body = answer.read()
    retry_after = answer.getheader("Retry-After")
    return answer.status, None if retry_after is None else float(retry_after), body


class Downstream:
    """The downstream's process, started on entering and stopped on leaving."""

    def __init__(self, limit: float, burst_s: float = 0.05, service_s: float = 0.0) -> None:
        context = multiprocessing.get_context("spawn")
        receive, send = context.Pipe(duplex=False)
        self._stop = context.Event()
        self._process = context.Process(target=_serve, args=(limit, burst_s, service_s, send,
                                                                self._stop),
                                        daemon=True)
        self._process.start()
        self.port: int = receive.recv()

    def __enter__(self) -> Downstream:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._process.join(10)

    def outage(self, seconds: float) -> None:
        """Refuse every call for the next ``seconds``."""
        call(self.port, f"/outage?s={seconds}")

    def stats(self) -> tuple[list[float], int]:
        """The accepted calls' times and the count of 429s so far."""
        accepted, refused = json.loads(call(self.port, "/stats")[2])
        return accepted, refused
