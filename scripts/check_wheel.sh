#!/usr/bin/env bash
# Packaging check (run by `scripts/dev.sh test`): build the sdist and wheel with `python -m build`,
# install the wheel (the sdist where the wheel's C extension is for another Python) into fresh
# virtual environments away from the source tree, one per Python 3.11+ found on PATH, and run
# `priority-kafka --help` there; with the first, also a short demo.
# Usage: bash scripts/check_wheel.sh PYTHON_WITH_BUILD [demo seconds, default 10]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
builder="${1:?usage: check_wheel.sh PYTHON_WITH_BUILD [DEMO_SECONDS]}"
demo_seconds="${2:-10}"
dist="$(mktemp -d)"; work="$(mktemp -d)"
trap 'rm -rf "$dist" "$work"' EXIT

"$builder" -m build --outdir "$dist" . >"$dist/build.log" 2>&1 || { tail -30 "$dist/build.log"; exit 1; }
wheel="$(ls "$dist"/*.whl)"; sdist="$(ls "$dist"/*.tar.gz)"
echo "built $(basename "$wheel") and $(basename "$sdist")"
for archive_check in "unzip -l $wheel" "tar tzf $sdist"; do
  listing="$($archive_check)"  # whole, not piped into grep -q (SIGPIPE under pipefail)
  grep -q "priority_kafka/broker-pom.xml" <<<"$listing" \
    || { echo "error: broker-pom.xml is missing from $archive_check" >&2; exit 1; }
done
grep -q "priority_kafka/confluent/_routing\.cpython" <<<"$(unzip -l "$wheel")" \
  || { echo "error: the wheel lacks the C extension priority_kafka/confluent/_routing" >&2; exit 1; }

first=""
for candidate in ${CHECK_PYTHONS:-python3.11 python3.12 python3.13}; do
  "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || continue
  venv="$work/venv-$candidate"
  "$candidate" -m venv "$venv"
  # The wheel carries a C extension for the builder's Python; other versions build the sdist.
  tag="$("$candidate" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
  archive="$sdist"; [[ "$(basename "$wheel")" == *"-$tag-"* ]] && archive="$wheel"
  "$venv/bin/python" -m pip install --quiet "$archive[cli,metrics]"
  # Away from the source tree, so only the installed package can be imported.
  (cd "$work" && "$venv/bin/priority-kafka" --help >/dev/null \
    && "$venv/bin/python" -c 'import priority_kafka, priority_kafka.metrics, priority_kafka.cli')
  echo "$("$venv/bin/python" --version): $(basename "$archive") installs; priority-kafka --help runs"
  first="${first:-$venv}"
done
[ -n "$first" ] || { echo "error: no Python 3.11+ found to install the wheel into" >&2; exit 1; }

start=$(date +%s)
(cd "$work" && "$first/bin/priority-kafka" demo --duration "$demo_seconds" --quiet \
   --out "$work/demo" >"$work/demo.log" 2>&1) || { tail -20 "$work/demo.log"; exit 1; }
[ -s "$work/demo/demo.png" ] || { echo "error: the demo wrote no chart" >&2; exit 1; }
echo "priority-kafka demo --duration $demo_seconds ran from the installed wheel in $(( $(date +%s) - start )) s"
