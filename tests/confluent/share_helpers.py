"""Shared by the share-group tests: consumers whose level groups read from the start, and a
ShareExecutor running on a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks._group_configs import set_group_configs
from priority_kafka.confluent import PriorityShareConsumer, ShareExecutor


def share_consumer(
    servers: str, topic: str, group: str, group_configs: dict[str, Any] | None = None,
    levels: int = 3, **configs: Any,
) -> PriorityShareConsumer:
    """A PriorityShareConsumer of ``topic`` whose level groups start from the earliest offsets
    (a share group's share.auto.offset.reset is a group config, 'latest' by default), with
    ``group_configs`` set on every level's group too."""
    set_group_configs(servers, [f"{group}-{level}" for level in range(levels)],
                      {"share.auto.offset.reset": "earliest", **(group_configs or {})})
    c = PriorityShareConsumer({"bootstrap.servers": servers, "group.id": group,
                               "max.priority": levels, **configs})
    c.subscribe([topic])
    return c


class Running:
    """A ShareExecutor's run() on a thread: ``with Running(executor) as r:``; leaving stops it
    and joins the thread; ``r.error`` is what run() raised."""

    def __init__(self, executor: ShareExecutor) -> None:
        self.executor = executor
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="share-executor", daemon=True)

    def _run(self) -> None:
        try:
            self.executor.run()
        except BaseException as exc:
            self.error = exc

    def __enter__(self) -> Running:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self, timeout_s: float = 60.0) -> None:
        self.executor.stop()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "run() did not return"

    def join(self, timeout_s: float = 60.0) -> None:
        """Wait for run() to end by itself (a failure under the stop policy)."""
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "run() did not end"


def wait_for(condition: Callable[[], Any], timeout_s: float = 60.0, what: str = "") -> None:
    """Wait (polling every 20 ms) until ``condition()`` is true."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what or condition}"
        time.sleep(0.02)
