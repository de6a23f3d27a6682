"""The parallel-consumer contender fails loudly: no Maven, no JDK or a broken harness each raise
HarnessError naming what is missing, so its smoke run can never pass by skipping."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import _parallel_consumer as pc


def test_without_maven_resolution_fails_naming_mvn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold cache and no ``mvn`` on PATH: HarnessError saying mvn resolves parallel-consumer."""
    monkeypatch.setenv("PRIORITY_KAFKA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pc.HarnessError, match=r"'mvn' was not found on PATH.*parallel-consumer"):
        pc.prepare()


def test_a_failing_maven_is_reported_with_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Maven that exits non-zero: HarnessError with its exit code and the end of its output,
    and no half-resolved classpath left in the cache."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text("#!/bin/sh\necho 'Could not find artifact pl.tlinkowski.unij:x' >&2\nexit 1\n")
    mvn.chmod(0o755)
    cache = tmp_path / "cache"
    monkeypatch.setenv("PRIORITY_KAFKA_CACHE", str(cache))
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(pc.HarnessError, match=r"(?s)exit 1.*pl\.tlinkowski\.unij"):
        pc.prepare()
    assert not list(cache.rglob("*.jar"))
    assert not any(path.name == "lib" for path in cache.rglob("*"))


def test_without_a_jdk_running_fails_naming_java(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``java`` on PATH when a run starts: HarnessError naming it, not a hang or a skip."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pc.HarnessError, match=r"'java' was not found on PATH.*JDK"):
        pc.run(("classes", "jars"), "localhost:9", "t", "g", 10, 4, "key", 0, 5.0, 5.0)
