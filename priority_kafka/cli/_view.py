"""Live terminal views and progress bars that degrade to plain periodic lines.

With ``rich`` installed (extra ``[cli]``) and stdout a terminal, views redraw in place. Otherwise
(a pipe, a CI log, no rich) they print one plain line every few seconds, so logs stay readable.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

Row = Sequence[object]


def _rich_available() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def fancy() -> bool:
    """Whether views redraw in place: stdout is a terminal and rich is installed."""
    return sys.stdout.isatty() and _rich_available()


class LiveView:
    """Shows ``rows()`` as a table, refreshed; ``title()`` above it.

    ``rows()`` returns the table's rows under ``columns``; it runs on the view's thread, so it
    must be safe to call from there. Without a terminal, each ``plain_every_s`` one line per
    row is printed instead (``title | column=value ...``).
    """

    def __init__(
        self,
        columns: Sequence[str],
        rows: Callable[[], Sequence[Row]],
        title: Callable[[], str] = lambda: "",
        refresh_s: float = 0.5,
        plain_every_s: float = 5.0,
        plain_stream: Any = None,
    ) -> None:
        self._stream = plain_stream
        self._columns = tuple(columns)
        self._rows = rows
        self._title = title
        self._refresh_s = refresh_s
        self._plain_every_s = plain_every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Any = None

    def renderable(self) -> Any:
        """The view for rich: the status line, then the table. The status line is its own
        line, so it spans the terminal's width (a table's title wraps at the table's)."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table()
        for column in self._columns:
            table.add_column(column, justify="right")
        for row in self._rows():
            table.add_row(*(str(cell) for cell in row))
        title = self._title()
        return Group(Text(title), table) if title else table

    def plain_lines(self) -> list[str]:
        """The view as plain lines (what a non-terminal gets)."""
        title = self._title()
        lines = [title] if title else []
        for row in self._rows():
            lines.append("  " + " ".join(
                f"{column}={cell}" for column, cell in zip(self._columns, row, strict=False)))
        return lines

    def _print_plain(self) -> None:
        while not self._stop.wait(self._plain_every_s):
            print("\n".join(self.plain_lines()), file=self._stream or sys.stdout, flush=True)

    def __enter__(self) -> LiveView:
        if fancy():
            from rich.live import Live

            self._live = Live(
                get_renderable=self.renderable, refresh_per_second=1 / self._refresh_s,
                transient=False,
            )
            self._live.start()
        else:
            self._thread = threading.Thread(target=self._print_plain, daemon=True,
                                            name="priority-kafka-view")
            self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._live is not None:
            self._live.stop()
        if self._thread is not None:
            self._thread.join()


class Progress:
    """A progress bar on stderr over ``total`` units (rich on a terminal; else a line every few
    seconds), so stdout stays for results."""

    def __init__(self, description: str, total: float | None, plain_every_s: float = 5.0) -> None:
        self._description = description
        self._total = total
        self._done = 0.0
        self._plain_every_s = plain_every_s
        self._next_plain = time.monotonic() + plain_every_s
        self._rich: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if sys.stderr.isatty() and _rich_available():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
            )
            self._rich.start()
            self._task = self._rich.add_task(self._description, total=self._total)
        return self

    def advance(self, amount: float = 1, total: float | None = None) -> None:
        """Add ``amount`` done (and, if given, change the total)."""
        self._done += amount
        if total is not None:
            self._total = total
        if self._rich is not None:
            self._rich.update(self._task, completed=self._done, total=self._total)
        elif time.monotonic() >= self._next_plain:
            self._next_plain += self._plain_every_s
            of = f" of {self._total:g}" if self._total else ""
            print(f"{self._description}: {self._done:g}{of}", file=sys.stderr, flush=True)

    def __exit__(self, *exc_info: object) -> None:
        if self._rich is not None:
            self._rich.stop()
