"""Where the local brokers' JVMs are forked from: one long-lived thread, so each dies with this
process and only with it."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
from typing import Any

__all__ = ["launch"]


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL the broker when the Python process that started it dies."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def launch(argv: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **popen)`` with the broker dying with this process, forked from
    one long-lived thread: Linux ties PR_SET_PDEATHSIG to the *thread* that forked, so a node
    (re)started from a short-lived thread died with that thread."""
    done: dict[str, Any] = {}
    finished = threading.Event()

    def spawn() -> None:
        try:
            done["process"] = subprocess.Popen(argv, preexec_fn=_die_with_parent, **popen)
        except BaseException as exc:  # raised below, on the caller's thread
            done["error"] = exc
        finished.set()

    with _LOCK:
        if not _LAUNCHER:
            _LAUNCHER.append(_Launcher())
    _LAUNCHER[0].calls.put(spawn)
    finished.wait()
    if "error" in done:
        raise done["error"]
    return done["process"]


class _Launcher(threading.Thread):
    """The thread every broker JVM is forked from; it lives as long as the process."""

    def __init__(self) -> None:
        super().__init__(name="priority-kafka-broker-launcher", daemon=True)
        self.calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.start()

    def run(self) -> None:
        while True:
            self.calls.get()()


_LAUNCHER: list[_Launcher] = []
_LOCK = threading.Lock()
