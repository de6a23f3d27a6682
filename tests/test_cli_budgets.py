"""`consume --budget NAME=RATE`: values as text, bad ones named, the budget applied."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from priority_kafka import PriorityProducer, create_priority_topics
from tests.test_cli import json_of, run_cli

TESTS = Path(__file__).parent


@pytest.mark.parametrize(("flag", "named"), [
    ("sms=fast", "'sms=fast'"), ("sms", "NAME=RATE"), ("sms=-3", "'sms=-3'"),
])
def test_a_bad_budget_is_named(capsys: pytest.CaptureFixture[str], flag: str, named: str) -> None:
    status, _, err = run_cli(capsys, "consume", "cli_handler:handle", "-t", "t", "-g", "g",
                             "-b", "127.0.0.1:1", "--budget", flag)
    assert status == 2 and named in err, err


def test_several_budgets_need_a_header(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run_cli(capsys, "consume", "cli_handler:handle", "-t", "t", "-g", "g",
                             "-b", "127.0.0.1:1", "--budget", "a=1", "--budget", "b=2",
                             "-n", "3")
    assert status != 0 and "'resource'" in err and "several resources" in err, err


@pytest.mark.integration
def test_consume_spends_the_budget_by_level(
    bootstrap_servers: str, unique_name: object, capsys: pytest.CaptureFixture[str],
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLI_HANDLER_OUT", str(tmp_path / "out.txt"))
    topic, group = unique_name("t"), unique_name("g")  # type: ignore[operator]
    create_priority_topics(bootstrap_servers, topic, 3)
    producer = PriorityProducer(max_priority=3, bootstrap_servers=bootstrap_servers)
    for i in range(60):
        producer.send(topic, value=str(i).encode(), priority=2 if i % 3 == 0 else 0)
    producer.flush()
    producer.close()
    sys.path.insert(0, str(TESTS))
    summary = json_of(capsys, "consume", "cli_handler:handle", "-t", topic, "-g", group,
                      "-n", "3", "-b", bootstrap_servers, "--budget", "api=40",
                      "--max-records", "60", "--duration", "60", "--json")
    levels = summary["budgets"]["api"]
    assert {str(level): values["records"] for level, values in levels.items()} == {
        "2": 20, "1": 0, "0": 40}
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 60
    assert summary["executor"]["handled"] == 60
    # 60 records at 40/s (burst 1) take at least 1.4 s.
    assert summary["elapsed_s"] >= 60 / 40 - 0.2
