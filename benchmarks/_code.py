"""Which priority_kafka the contenders import: this checkout's, or another commit's (``--code``).

``--code NAME=PATH`` (repeatable; PATH a checkout, for example a ``git worktree`` of an older
commit, holding ``priority_kafka/``) runs every contender of the benchmark once per code version
in the same interleaved run: this checkout's (``current``) and each named one, taking turns
within each round like any two contenders. Only the library comes from PATH: the benchmark, its
harness and its settings are this checkout's, so a before/after comparison measures the
library alone. A contender runs in a fresh process whose ``sys.path`` (and ``PYTHONPATH``, for
the processes it starts, such as Spark's Python workers) puts a directory holding only a link
to ``PATH/priority_kafka`` first; the process checks that it imported that package before it
runs. A C extension (``confluent/_routing``) is used if it was built in PATH (``python setup.py
build_ext --inplace`` there), else that code's pure-Python fallback.

The benchmark's own figures come from the ``current`` runs, as without ``--code``; the JSON gets
a ``code`` section with, per contender and per numeric figure of its results, every version's
per-round values and the per-round ratios ``current / NAME`` (median, min, max). Contenders that
do not use priority_kafka (a raw client) run per version too: their ratios show the noise.
``python -m benchmarks._code RESULT.json [FIGURE ...]`` prints those ratios as a table.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs

__all__ = [
    "CURRENT", "Code", "add_code_argument", "check_loaded", "comparison", "library_module",
    "record", "registry", "table", "use", "versions",
]


@attrs.frozen
class Code:
    """A version of priority_kafka: this checkout's (``path`` None) or another checkout's."""

    name: str
    path: Path | None = None
    #: A directory holding only a link named ``priority_kafka`` to ``path/priority_kafka``.
    link_dir: Path | None = None

    @property
    def package_dir(self) -> Path | None:
        """The ``priority_kafka`` directory a contender of this version must import."""
        return None if self.path is None else (self.path / "priority_kafka").resolve()

    @contextlib.contextmanager
    def importable(self) -> Iterator[None]:
        """While a process is started in this block, it imports this version's priority_kafka:
        the link directory comes first on ``sys.path`` (which a spawned process copies) and on
        ``PYTHONPATH`` (which its own children read: Spark's Python workers, subprocesses),
        followed by this checkout (for ``benchmarks`` and ``tests``); ``PYTHONSAFEPATH`` keeps
        those children from putting their working directory, this checkout, first."""
        if self.link_dir is None:
            yield
            return
        saved_path = list(sys.path)
        saved_env = {name: os.environ.get(name) for name in ("PYTHONPATH", "PYTHONSAFEPATH")}
        sys.path.insert(0, str(self.link_dir))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(self.link_dir), str(_CHECKOUT), saved_env["PYTHONPATH"]])
        )
        os.environ["PYTHONSAFEPATH"] = "1"
        try:
            yield
        finally:
            sys.path[:] = saved_path
            for name, value in saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


#: This checkout: the benchmarks, their harness and the ``current`` priority_kafka.
_CHECKOUT = Path(__file__).resolve().parents[1]
CURRENT = Code("current")
_versions: list[Code] = [CURRENT]
# Per interleave() call of this benchmark run: every version's results, by contender.
_recorded: list[dict[str, Any]] = []


#: Where a priority_kafka module the harness imports lived before it moved, for a ``--code``
#: checkout older than the move (issue 38 put the kafka-python edge in ``kafka_python/``).
_FORMER_PATHS = {"priority_kafka.kafka_python._kafka": "priority_kafka._kafka"}


def library_module(name: str) -> ModuleType:
    """priority_kafka's module ``name`` from the imported version, at its former path
    (``_FORMER_PATHS``) in a checkout from before it moved."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        former = _FORMER_PATHS.get(name)
        if former is None:
            raise
        return importlib.import_module(former)


def registry() -> ModuleType:
    """``priority_kafka.families``, the client families' registry: the imported version's, or
    this checkout's for a checkout from before it existed (the benchmarks name the families
    as this checkout does; only names and spellings are read from it there)."""
    try:
        return importlib.import_module("priority_kafka.families")
    except ModuleNotFoundError as exc:
        if exc.name != "priority_kafka.families":
            raise
    return _load_registry("priority_kafka.families")


def _load_registry(name: str) -> ModuleType:
    """This checkout's ``priority_kafka/families.py``, imported as module ``name``."""
    spec = importlib.util.spec_from_file_location(
        name, _CHECKOUT / "priority_kafka" / "families.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def family(name: str) -> Any:
    """The family called ``name`` with what it can do (its capabilities: which client calls a
    benchmark makes, which features it has), as this checkout's registry says: a ``--code``
    checkout's registry from before the capabilities names the families but not those."""
    families = registry()
    if not hasattr(families, "CAPABILITIES"):
        families = sys.modules.get("benchmarks._families") or _load_registry(
            "benchmarks._families"
        )
    return families.family(name)


def add_code_argument(parser: argparse.ArgumentParser) -> None:
    """``--code NAME=PATH``, repeatable."""
    parser.add_argument(
        "--code", action="append", default=[], metavar="NAME=PATH",
        help="also run every contender on the priority_kafka of the checkout at PATH (for "
        "example a worktree of an older commit), interleaved; the JSON's 'code' section has "
        "the per-round ratios current / NAME",
    )


def use(specs: Sequence[str]) -> None:
    """Set the versions of this run from ``--code`` values (none: this checkout's only)."""
    chosen = [CURRENT]
    for spec in specs:
        name, sep, path_text = spec.partition("=")
        path = Path(path_text).expanduser().resolve()
        if not sep or not name or name in {code.name for code in chosen} or "/" in name:
            raise SystemExit(f"--code wants NAME=PATH with a new NAME without '/' (got {spec!r})")
        if not (path / "priority_kafka" / "__init__.py").is_file():
            raise SystemExit(f"--code {spec!r}: {path} holds no priority_kafka package")
        link_dir = Path(tempfile.mkdtemp(prefix=f"priority-kafka-code-{name}-"))
        atexit.register(shutil.rmtree, link_dir, ignore_errors=True)
        (link_dir / "priority_kafka").symlink_to(path / "priority_kafka", target_is_directory=True)
        chosen.append(Code(name, path, link_dir))
    _versions[:] = chosen
    _recorded.clear()


def versions() -> list[Code]:
    """The versions every contender runs on, ``current`` first."""
    return list(_versions)


def check_loaded(package_dir: str | None) -> None:
    """In a contender's process: fail unless priority_kafka comes from ``package_dir``."""
    if package_dir is None:
        return
    import priority_kafka

    loaded = Path(priority_kafka.__file__).resolve().parent
    if loaded != Path(package_dir):
        raise RuntimeError(f"imported priority_kafka from {loaded}, not from {package_dir}")


def _figures(result: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of a contender's result, nested keys joined by "/" (lists left out)."""
    found: dict[str, float] = {}
    for key, value in result.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            found[prefix + str(key)] = value
        elif isinstance(value, Mapping):
            found.update(_figures(value, f"{prefix}{key}/"))
    return found


def record(
    results: Mapping[str, Mapping[str, list[dict[str, Any]]]], summary: Mapping[str, Any]
) -> None:
    """Keep one interleaved run's results (``{version: {contender: [result per round]}}``) and
    how it was interleaved, for :func:`comparison`."""
    if len(_versions) > 1:
        _recorded.append({"results": results, "interleaving": summary})


def comparison() -> dict[str, Any] | None:
    """The ``code`` section of the result JSON (None without ``--code``)."""
    if len(_versions) == 1:
        return None
    runs = []
    for recorded in _recorded:
        results = recorded["results"]
        contenders: dict[str, Any] = {}
        for contender in results[CURRENT.name]:
            per_version = {
                code.name: [_figures(r) for r in results[code.name][contender]]
                for code in _versions
            }
            # A failed run (benchmarks._common.FAILED) has no figures: None in its round.
            keys = set.intersection(*(
                set().union(*rounds) for rounds in per_version.values()
            ))
            figures: dict[str, Any] = {}
            for key in sorted(keys):
                values = {
                    name: [r.get(key) for r in rounds] for name, rounds in per_version.items()
                }
                entry: dict[str, Any] = {"per_round": values}
                for code in _versions[1:]:
                    ratios = [
                        now / then if then else float("nan")
                        for now, then in zip(values[CURRENT.name], values[code.name], strict=True)
                        if now is not None and then is not None
                    ]
                    if not ratios:
                        continue
                    entry[f"{CURRENT.name} / {code.name}"] = {
                        "ratio": statistics.median(ratios),
                        "ratio_per_round": ratios,
                        "ratio_min": min(ratios),
                        "ratio_max": max(ratios),
                    }
                figures[key] = entry
            contenders[contender] = figures
        runs.append({"contenders": contenders, "interleaving": recorded["interleaving"]})
    return {
        "versions": {
            code.name: str(code.path if code.path else _CHECKOUT)
            for code in _versions
        },
        "runs": runs,
    }


def table(document: Mapping[str, Any], figures: Sequence[str] = ()) -> list[str]:
    """Markdown rows of a result JSON's ``code`` section: per run, contender and figure (those
    named, or all), the median ratio ``current / NAME`` and the per-round ratios."""
    section = document.get("code")
    if section is None:
        raise SystemExit(f"{document.get('benchmark')}: no 'code' section (run it with --code)")
    rows = ["| run | contender | figure | ratio | per round |", "|---|---|---|---|---|"]
    for index, run in enumerate(section["runs"]):
        for contender, found in run["contenders"].items():
            for figure, entry in found.items():
                if figures and figure not in figures:
                    continue
                for label, ratios in entry.items():
                    if label == "per_round":
                        continue
                    rounds = ", ".join(f"{r:.3f}" for r in ratios["ratio_per_round"])
                    rows.append(f"| {index} | {contender} | {figure} ({label}) | "
                                f"{ratios['ratio']:.3f} | {rounds} |")
    return rows


if __name__ == "__main__":
    reader = argparse.ArgumentParser(description="Print the current / NAME ratios of a result "
                                     "written with --code.")
    reader.add_argument("result", type=Path, help="the benchmark's JSON")
    reader.add_argument("figures", nargs="*", help="figures to show (default: all)")
    given = reader.parse_args()
    print("\n".join(table(json.loads(given.result.read_text()), given.figures)))
