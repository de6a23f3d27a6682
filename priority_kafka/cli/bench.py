"""``priority-kafka bench``: run the benchmark suite (or some of it); JSON, PNGs and a summary.

The benchmarks live in the source tree's ``benchmarks/`` package (not in the wheel): run this
from a checkout of the repository.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import pkgutil
import time
import traceback
from pathlib import Path
from typing import Any

from priority_kafka.cli._common import (
    CliError,
    add_bootstrap,
    add_json,
    bootstrap,
    emit_json,
    example,
    note,
    output_directory,
)
from priority_kafka.cli._view import Progress


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "bench", help="run the benchmarks (from a source checkout); JSON, PNGs, Markdown summary",
        description="Run benchmarks/<name>.py for each NAME (default: all) against one broker, "
        "writing <name>.json, their PNG charts, <name>.log and summary.md to --out. --smoke "
        "runs tiny workloads (their numbers mean nothing). Needs the repository's benchmarks/ "
        "package on the path (run from the checkout).",
        epilog=example("priority-kafka bench distributors burst --out bench-results",
                       "priority-kafka bench --list"),
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run")
    parser.add_argument("--smoke", action="store_true", help="tiny workloads, for a quick check")
    parser.add_argument("--out", type=Path, default=Path("bench-results"),
                        help="results directory (default ./bench-results)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    add_bootstrap(parser, local=True)
    add_json(parser)
    parser.set_defaults(run=run)


def available() -> dict[str, str]:
    """Benchmark name -> the first line of its docstring."""
    try:
        package = importlib.import_module("benchmarks")
    except ImportError:
        raise CliError(
            "the benchmarks/ package is not present: `bench` runs from a source checkout of "
            "priority_kafka (cd into it; the wheel does not ship the benchmarks)"
        ) from None
    names = sorted(
        info.name for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    )
    result = {}
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        if callable(getattr(module, "main", None)):
            result[name] = (module.__doc__ or "").strip().splitlines()[0]
    return result


def _scalars(document: dict[str, Any], prefix: str = "", depth: int = 4) -> dict[str, Any]:
    """The numbers of a benchmark's JSON, nested keys joined by "/" (at most ``depth`` deep)."""
    numbers: dict[str, Any] = {}
    for key, value in document.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            numbers[f"{prefix}{key}"] = value
        elif isinstance(value, dict) and depth > 1:
            numbers.update(_scalars(value, f"{prefix}{key}/", depth - 1))
    return numbers


def summary_markdown(results: dict[str, dict[str, Any]], out: Path) -> str:
    lines = ["# Benchmark results", ""]
    for name, outcome in results.items():
        lines.append(f"## {name}")
        lines.append("")
        if outcome.get("error"):
            lines += [f"Failed: `{outcome['error']}` (see `{name}.log`).", ""]
            continue
        lines.append(f"{outcome['title']} ({outcome['seconds']:.0f} s; `{name}.json`)")
        lines.append("")
        numbers = outcome["numbers"]
        if numbers:
            lines += ["| figure | value |", "|---|---|"]
            lines += [f"| {key} | {value:.4g} |" if isinstance(value, float)
                      else f"| {key} | {value} |" for key, value in numbers.items()]
            lines.append("")
        for image in outcome["images"]:
            lines += [f"![{name}]({Path(image).relative_to(out)})", ""]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    benchmarks = available()
    if args.list:
        if args.json:
            emit_json(benchmarks)
        else:
            for name, title in benchmarks.items():
                print(f"{name:<22} {title}")
        return 0
    unknown = [name for name in args.names if name not in benchmarks]
    if unknown:
        raise CliError(f"unknown benchmark(s) {', '.join(unknown)}; known: "
                       f"{', '.join(benchmarks)}")
    names = args.names or list(benchmarks)
    output_directory(args.out)
    results: dict[str, dict[str, Any]] = {}
    with bootstrap(args.bootstrap_servers) as servers, \
            Progress("benchmarks", len(names)) as progress:
        for name in names:
            note(f"running benchmarks.{name} ...")
            before = set(args.out.rglob("*.png"))
            started = time.monotonic()
            log = io.StringIO()
            argv = ["--out", str(args.out), "--bootstrap-servers", servers]
            try:
                with contextlib.redirect_stdout(log):
                    importlib.import_module(f"benchmarks.{name}").main(
                        [*argv, "--smoke"] if args.smoke else argv)
                document = json.loads((args.out / f"{name}.json").read_text())
                results[name] = {
                    "title": benchmarks[name], "seconds": time.monotonic() - started,
                    "numbers": _scalars(document),
                    "images": sorted(str(p) for p in set(args.out.rglob("*.png")) - before),
                }
            except Exception as exc:  # one failed benchmark must not lose the others
                log.write(traceback.format_exc())
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            (args.out / f"{name}.log").write_text(log.getvalue())
            progress.advance()
    (args.out / "summary.md").write_text(summary_markdown(results, args.out) + "\n")
    failed = [name for name, outcome in results.items() if outcome.get("error")]
    if args.json:
        emit_json({"out": str(args.out), "results": results})
    else:
        for name, outcome in results.items():
            status = outcome.get("error") or f"ok in {outcome['seconds']:.0f} s"
            print(f"{name:<22} {status}")
        print(f"summary: {args.out / 'summary.md'}")
    if failed:
        raise CliError(f"benchmark(s) failed: {', '.join(failed)} (logs in {args.out})")
    return 0
