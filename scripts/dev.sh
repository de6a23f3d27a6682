#!/usr/bin/env bash
# One entry point for a fresh machine (Python 3.11+, Java 17+, Maven): sets up the virtual
# environment, installs the package with its dev extras, resolves the Kafka broker's jars from
# Maven Central, then runs the demo (`demo`: `priority-kafka demo`), builds the docs site
# (`docs`, into site/; `docs serve` serves it, with the npm tools the site needs) or runs the
# whole test suite (`test`: lint, types, pytest with the docs site built and opened in a
# headless browser, and the wheel installed into a fresh venv).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv="${PRIORITY_KAFKA_VENV:-.venv}"
python="${PYTHON:-python3}"

die() { echo "error: $*" >&2; exit 1; }

setup() {
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
    || die "Python 3.11 or newer is needed as '$python' (set PYTHON=/path/to/python3.11)."
  command -v java >/dev/null || die "Java 17 or newer is needed on PATH (Debian: openjdk-17-jdk-headless)."
  java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])' \
    || die "Java 17 or newer is needed; found: $(java -version 2>&1 | head -1)"
  command -v mvn >/dev/null || die "Maven is needed on PATH to resolve the broker jars (Debian: maven)."
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  # Reinstall only when the declared dependencies or the C extension change.
  local stamp="$venv/.installed-$(cat setup.cfg pyproject.toml setup.py priority_kafka/confluent/_routing.c | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -e '.[dev]'
    rm -f "$venv"/.installed-*
    touch "$stamp"
  fi
  "$venv/bin/python" -c 'from priority_kafka.cli._common import note_jar_resolution; note_jar_resolution()
from priority_kafka.testing import broker_jars; print("Kafka broker jars:", broker_jars())'
}

# The docs site's own copy of mermaid and the headless Chromium of its browser test (npm).
setup_site_tools() {
  command -v npm >/dev/null || die "Node.js 18+ with npm is needed for the docs site and its browser test (Debian: nodejs npm)."
  local stamp="tools/site/node_modules/.installed-$(sha256sum tools/site/package-lock.json | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    npm ci --prefix tools/site --no-audit --no-fund --loglevel=error
    touch "$stamp"
  fi
}

case "${1:-}" in
  demo)
    setup
    shift
    exec "$venv/bin/priority-kafka" demo "$@"
    ;;
  docs)
    # The site needs the npm tools (mermaid) that the demo's setup leaves out.
    setup
    setup_site_tools
    shift
    # Without it, mkdocs-material prints a banner about its end of life at every build.
    export NO_MKDOCS_2_WARNING=1
    if [ "${1:-}" = serve ]; then
      shift
      exec "$venv/bin/mkdocs" serve "$@"
    fi
    exec "$venv/bin/mkdocs" build --strict "$@"
    ;;
  test)
    start=$(date +%s)
    # npm beside pip: both mostly wait on downloads and disk.
    site_log="$(mktemp)"
    setup_site_tools >"$site_log" 2>&1 &
    site_pid=$!
    trap 'kill "$site_pid" 2>/dev/null || true; rm -f "$site_log"' EXIT
    setup
    wait "$site_pid" || { cat "$site_log"; rm -f "$site_log"; exit 1; }
    rm -f "$site_log"
    shift
    echo "setup: $(( $(date +%s) - start )) s"
    echo "== ruff"; "$venv/bin/ruff" check .
    status=0
    # Beside pytest: mypy, and the packaging check (it builds, installs and waits on a demo's
    # broker). The docs site is built --strict by its browser test (tests/test_docs_site.py).
    mypy_log="$(mktemp)"
    wheel_log="$(mktemp)"
    "$venv/bin/mypy" >"$mypy_log" 2>&1 &
    mypy_pid=$!
    bash scripts/check_wheel.sh "$venv/bin/python" >"$wheel_log" 2>&1 &
    wheel_pid=$!
    trap 'kill "$mypy_pid" "$wheel_pid" 2>/dev/null || true; rm -f "$mypy_log" "$wheel_log"' EXIT
    echo "== pytest"
    # Four workers on two cores (pytest-xdist; tests/conftest.py groups them, so one worker
    # starts the Spark session and one the 3-node cluster): most of the suite waits on a
    # broker, a JVM or a handler's sleep. Measured on a fresh clone: pytest 466 s, the whole
    # run 502 s (three workers with the groups ignored: 579-605 s of pytest).
    # A worker ended by tests/conftest.py's hard timeout (a hang pytest-timeout cannot end) is
    # not restarted: pytest-xdist would hand the hung test to the next worker, and the next.
    "$venv/bin/python" -m pytest -n "${PYTEST_WORKERS:-4}" --dist loadgroup --max-worker-restart=0 \
      --durations=25 "$@" || status=$?
    echo "== mypy"
    wait "$mypy_pid" || status=$?
    cat "$mypy_log"
    echo "== wheel"
    wait "$wheel_pid" || status=$?
    cat "$wheel_log"
    echo "suite wall time: $(( $(date +%s) - start )) s"
    exit "$status"
    ;;
  *)
    die "usage: bash scripts/dev.sh demo|docs [serve]|test [args...]"
    ;;
esac
