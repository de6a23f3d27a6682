"""Signal handling of an executor's blocking ``run()``: SIGTERM and SIGINT stop it gracefully."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from priority_kafka.errors import ConfigError, IllegalStateError

__all__ = ["handle_stop_signals", "run_signals"]

log = logging.getLogger("priority_kafka.executor")


@contextlib.contextmanager
def handle_stop_signals(stop: Callable[[], None]) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGINT call ``stop()`` (main thread only).

    A second SIGINT (Ctrl-C pressed again while stopping) raises KeyboardInterrupt at once,
    so a drain that takes too long can still be cut short. The previous handlers are restored
    when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        raise IllegalStateError("signals can be handled on the main thread only.")
    requested = False

    def request_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal requested
        if requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        requested = True
        log.info("signal %s: stopping gracefully", signal.Signals(signum).name)
        stop()

    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {sig: signal.signal(sig, request_stop) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_signals(handle_signals: bool | None, stop: Callable[[], None]
                ) -> contextlib.AbstractContextManager[None]:
    """The signal handling of an executor's ``run(handle_signals)``: ``None`` (the default)
    handles SIGINT and SIGTERM on the main thread and leaves them alone elsewhere; ``True``
    insists (IllegalStateError off the main thread); ``False`` leaves them alone."""
    if handle_signals is not None and not isinstance(handle_signals, bool):
        raise ConfigError(
            f"'handle_signals' must be True, False or None (got {handle_signals!r})."
        )
    on_main = threading.current_thread() is threading.main_thread()
    if handle_signals or (handle_signals is None and on_main):
        return handle_stop_signals(stop)
    return contextlib.nullcontext()
