"""README.md and docs/getting-started.md run as written, against a broker at localhost:9092
(and the site's home page, docs/index.md, marks its sketches as such).

The pages' conventions, which this test reads:

* A ```` ```python ```` block is a whole program: it is run as it is, in a fresh interpreter,
  and must exit 0 within its timeout, printing at least one line. Its last line must match the
  ``EXPECTED_LAST_LINE`` entry of the program's first distinctive line (below), so a program
  that ends early, or prints nothing useful, fails.
* A python block right after ``<!-- fragment: why -->`` is a fragment: shown, not run (the
  Spark example needs a SparkSession).
* A python block right after ``<!-- file: NAME -->`` is a module the following commands use:
  it is written to ``NAME`` in the commands' working directory.
* In a ```` ```bash ```` block, the lines starting with ``priority-kafka`` are run in order
  (``python -m priority_kafka ...``) and must exit 0; ``priority-kafka broker --port 9092`` is
  the broker this test itself starts (the same command, kept running for the module).

The broker: the documented ``priority-kafka broker --port 9092``. When port 9092 is taken on
the machine (another broker, another test run), the programs run unchanged but for the port,
against a broker this test starts on a free port: a warning says so, and the test still
proves everything except the literal port number.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/getting-started.md", "docs/index.md", "docs/budgets.md")
ADDRESS = "localhost:9092"
PROGRAM_TIMEOUT_S = 180

# The last line each program prints, by a line of the program that tells it apart.
EXPECTED_LAST_LINE = {
    'print(f"handled {handled} records")': r"handled 300 records",
    'print("handled", handled)': r"handled \{'orders-0': 100, 'orders-1': 100, 'orders-2': 100\}",
    'print(f"handled {handled} messages")': r"handled 300 messages",
    # docs/budgets.md: at most the rate (100/s) plus its burst in any second, give or take
    # the workers' pick-up; the one throttle seen.
    "in any second, throttled": r"220 calls, at most (\d{1,2}|10\d) in any second, throttled 1x",
}

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
_MARK = re.compile(r"<!--\s*(fragment|file):?\s*([^>]*?)\s*-->\s*$")


@attrs.frozen
class Block:
    page: str
    line: int
    language: str
    code: str
    mark: str | None  # "fragment" or "file"
    argument: str  # the fragment's reason or the file's name

    @property
    def label(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: str) -> list[Block]:
    text = (ROOT / page).read_text()
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.search(before)
        found.append(Block(
            page=page, line=text.count("\n", 0, match.start()) + 1, language=match.group(1),
            code=match.group(2), mark=mark.group(1) if mark else None,
            argument=mark.group(2) if mark else "",
        ))
    return found


def programs() -> list[Block]:
    return [b for page in PAGES for b in blocks(page) if b.language == "python" and not b.mark]


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    """``localhost:9092`` served by ``priority-kafka broker --port 9092`` (or, when 9092 is
    taken, the same command on a free port, with a warning)."""
    from priority_kafka.testing import _free_port

    port = 9092
    if not _port_free(port):
        port = _free_port()
        message = (f"port 9092 is taken on this machine: the examples run against a broker "
                   f"on localhost:{port} instead (only the port is changed)")
        print(message, file=sys.stderr)
        warnings.warn(message, stacklevel=1)
    process = subprocess.Popen(
        [sys.executable, "-m", "priority_kafka", "broker", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        printed = process.stdout.readline().strip()
        if not printed:
            process.wait(30)
            pytest.fail(f"priority-kafka broker --port {port} ended (exit {process.returncode}):"
                        f" {process.stderr.read() if process.stderr else ''}")
        assert printed == f"127.0.0.1:{port}", printed
        yield f"localhost:{port}"
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def as_run(code: str, address: str) -> str:
    return code.replace(ADDRESS, address)


def test_the_pages_have_programs_and_every_python_block_is_run_or_marked() -> None:
    """The conventions hold: every expected program is there, and every run one has its
    expectation (so a new example is not run without a check of what it prints)."""
    runnable = programs()
    assert len(runnable) >= 3
    for block in runnable:
        keys = [key for key in EXPECTED_LAST_LINE if key in block.code]
        assert len(keys) == 1, (
            f"{block.label}: a python block is a program with one EXPECTED_LAST_LINE entry, or "
            f"marked <!-- fragment: why --> or <!-- file: name --> (found {keys})")
    for page in PAGES:
        for block in blocks(page):
            if block.mark:
                assert block.language == "python" and block.argument, block.label


def _tail(text: str | bytes | None, chars: int = 3000) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return (text or "")[-chars:]


@pytest.mark.integration
def test_the_python_programs_of_the_pages_run_as_written(address: str, tmp_path: Path) -> None:
    """Each program in page order, one after the other: they share the group ``billing``,
    whose commits carry over from one to the next, as the README says."""
    for block in programs():
        script = tmp_path / "example.py"
        script.write_text(as_run(block.code, address))
        try:
            done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                                  timeout=PROGRAM_TIMEOUT_S, cwd=tmp_path, env=_env())
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{block.label} did not end within {PROGRAM_TIMEOUT_S} s; it printed:\n"
                        f"{_tail(exc.stdout)}\n{_tail(exc.stderr)}")
        print(f"--- {block.label} (exit {done.returncode})\n{done.stdout}{_tail(done.stderr)}")
        assert done.returncode == 0, (
            f"{block.label} failed:\n{_tail(done.stdout)}\n{_tail(done.stderr)}")
        lines = done.stdout.strip().splitlines()
        assert lines, f"{block.label} printed nothing"
        (expected,) = [v for k, v in EXPECTED_LAST_LINE.items() if k in block.code]
        assert re.fullmatch(expected, lines[-1]), f"{block.label}: last line {lines[-1]!r}"


@pytest.mark.integration
def test_the_command_lines_of_getting_started_run_as_written(
    address: str, tmp_path: Path
) -> None:
    """Each ``priority-kafka`` line, in order, in a directory holding the page's files."""
    commands = []
    for block in blocks("docs/getting-started.md"):
        if block.mark == "file":
            (tmp_path / block.argument).write_text(block.code)
        elif block.language == "bash":
            joined = block.code.replace("\\\n", " ")  # continuation lines
            commands += [" ".join(line.split("#", 1)[0].split()) for line in joined.splitlines()
                         if line.startswith("priority-kafka ")]
    assert "priority-kafka broker --port 9092" in commands  # the fixture's own command
    run = [c for c in commands if not c.startswith("priority-kafka broker")]
    assert any(c.startswith("priority-kafka consume") for c in run)
    outputs = []
    for command in run:
        args = shlex.split(as_run(command, address))[1:]
        done = subprocess.run([sys.executable, "-m", "priority_kafka", *args],
                              capture_output=True, text=True, timeout=PROGRAM_TIMEOUT_S,
                              cwd=tmp_path, env=_env())
        print(f"$ {command}\n{done.stdout}{done.stderr}")
        assert done.returncode == 0, f"{command!r} exited {done.returncode}: {_tail(done.stderr)}"
        outputs.append(done.stdout + done.stderr)
    by_command = dict(zip(run, outputs, strict=True))
    consume = next(out for c, out in by_command.items() if c.startswith("priority-kafka consume"))
    assert "handled 3000 " in consume
    lag = next(out for c, out in by_command.items() if c.startswith("priority-kafka lag"))
    assert "total lag 0 (level 2: 0, level 1: 0, level 0: 0)" in lag
