"""What every command shares: options, the broker, handler specs, output, errors."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import sys
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from priority_kafka.errors import ConfigError


class CliError(ConfigError):
    """Bad input or an unmet precondition: printed as one line, exit status 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with errors as one line (no usage dump) and examples kept as written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # argparse's signature: it never returns
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def plain(doc: str | None) -> str:
    """A docstring as ``--help`` text: without reStructuredText roles and literals."""
    text = re.sub(r":\w+:`~?([^`]+)`", lambda m: m[1].rsplit(".", 1)[-1], doc or "")
    return text.replace("``", "")


def example(*lines: str) -> str:
    """An ``--help`` epilog showing example command lines."""
    return "example:\n" + "\n".join(f"  {line}" for line in lines)


def add_bootstrap(parser: argparse.ArgumentParser, local: bool = False) -> None:
    """``--bootstrap-servers``; with ``local``, optional (a local broker is started without)."""
    parser.add_argument(
        "--bootstrap-servers", "-b", required=not local, metavar="HOST:PORT",
        help="Kafka brokers" + (" (default: start a local broker for this run)" if local else ""),
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


@contextlib.contextmanager
def bootstrap(servers: str | None) -> Iterator[str]:
    """The given brokers, or a local broker started for the block (stopped after it)."""
    if servers:
        yield servers
        return
    from priority_kafka.testing import local_kafka

    note_jar_resolution()
    note("starting a local Apache Kafka broker ...")
    with local_kafka() as broker:
        note(f"local broker at {broker.bootstrap_servers}")
        yield broker.bootstrap_servers


def output_directory(path: Path) -> Path:
    """``--out``, created now: a directory that cannot be is bad input, said before the run
    rather than after it (demo writes its results at the end)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--out {str(path)!r} cannot be created: {exc.strerror or exc}") from None
    return path


def note_jar_resolution() -> None:
    """Say that Maven resolves the broker's jars, when it is about to (the first run only)."""
    from priority_kafka.testing import KAFKA_VERSION, cache_root
    from priority_kafka.testing._jars import cached_broker_jars

    if cached_broker_jars() is None:
        note(f"resolving Apache Kafka {KAFKA_VERSION}'s jars with Maven (once, into "
             f"{cache_root()}) ...")


def note(message: str) -> None:
    """A progress note, on stderr (stdout is for results)."""
    print(message, file=sys.stderr, flush=True)


def emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, default=str), flush=True)


def handler_spec(spec: str) -> str:
    """argparse type for ``package.module:function``: the form only; :func:`load_handler`
    imports it once ``--app-dir`` is known."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise argparse.ArgumentTypeError(f"expected package.module:function (got {spec!r})")
    return spec


def add_app_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app-dir", default=".", metavar="DIR",
        help="import the handler's module from this directory first (default: the current "
        "directory, as uvicorn and celery do)",
    )


def load_handler(spec: str, app_dir: str = ".") -> Callable[[Any], Any]:
    """``package.module:function`` -> the function, imported with ``app_dir`` first on
    ``sys.path``; a spec that does not load is a :class:`CliError` naming it."""
    module_name, _, attribute = handler_spec(spec).partition(":")
    directory = os.path.abspath(app_dir)
    if not os.path.isdir(directory):
        raise CliError(f"--app-dir {app_dir!r} is not a directory")
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot load handler {spec!r} (from {directory}): {exc}") from exc
    except SyntaxError as exc:
        raise CliError(f"cannot load handler {spec!r}: {exc.msg} at {exc.filename}, line "
                       f"{exc.lineno}") from exc
    except Exception as exc:  # the module itself raised while it was imported
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        raise CliError(f"cannot load handler {spec!r}: importing it raised {exc!r} at "
                       f"{frame.filename}, line {frame.lineno}") from exc
    try:
        handler = getattr(module, attribute)
    except AttributeError as exc:
        raise CliError(f"cannot load handler {spec!r} (from {directory}): {exc}") from exc
    if not callable(handler):
        raise CliError(f"handler {spec!r} is not callable")
    return handler


def key_value(text: str) -> str:
    """argparse type for ``KEY=VALUE``."""
    if "=" not in text or text.startswith("="):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (got {text!r})")
    return text


def setting(text: str) -> str:
    """argparse type for ``-c``: ``KEY=VALUE``, or ``@FILE`` for the entries of a Java
    ``.properties`` file."""
    if text.startswith("@"):
        if not os.path.isfile(text[1:]):
            raise argparse.ArgumentTypeError(f"no such properties file {text[1:]!r}")
        return text
    return key_value(text)


def properties_file(path: str) -> str:
    """argparse type for ``--config-file FILE``: the same entry as ``-c @FILE``."""
    return setting(f"@{path}")


def settings(items: Sequence[str]) -> dict[str, str]:
    """The settings of ``-c`` items in their order (a later one wins): ``KEY=VALUE`` entries
    and the entries of ``@FILE`` properties files, all strings (the clients convert them)."""
    from priority_kafka._properties import load_properties

    result: dict[str, str] = {}
    for item in items:
        if item.startswith("@"):
            result.update(load_properties(item[1:]))
        else:
            key, value = item.split("=", 1)
            result[key] = value
    return result


_NAMES: dict[Callable[[str], Any], str] = {int: "an integer", float: "a number"}


def positive(kind: Callable[[str], Any], minimum: float = 1) -> Callable[[str], Any]:
    """argparse type: ``kind(text)`` at least ``minimum``."""

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {_NAMES.get(kind, kind.__name__)} (got {text!r})") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g} (got {text})")
        return value

    convert.__name__ = kind.__name__
    return convert


def weights(text: str) -> tuple[float, ...]:
    """argparse type: comma-separated non-negative weights, lowest level first (``6,3,1``)."""
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers such as 6,3,1 (got {text!r})") from None
    if any(v < 0 for v in values) or not sum(values) > 0:
        raise argparse.ArgumentTypeError(
            f"weights must be non-negative with a positive sum (got {text!r})")
    return values


def level_mix(mix: Sequence[float] | None, max_priority: int) -> list[float]:
    """Normalised shares per level (lowest first); equal shares when ``mix`` is None."""
    if mix is None:
        return [1 / max_priority] * max_priority
    if len(mix) != max_priority:
        raise CliError(
            f"--priority-mix needs {max_priority} weights, one per level from 0 up "
            f"(got {len(mix)}: {','.join(f'{w:g}' for w in mix)})"
        )
    total = sum(mix)
    return [w / total for w in mix]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()
