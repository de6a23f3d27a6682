"""The `priority-kafka` CLI: every command against the real broker, and bad input as one line."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from priority_kafka import PriorityProducer, create_priority_topics
from priority_kafka.cli import main
from priority_kafka.families import NAMES, family
from priority_kafka.metrics import PROMETHEUS_METRICS

TESTS = Path(__file__).resolve().parent


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit status, stdout, stderr)."""
    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def json_of(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    status, out, err = run_cli(capsys, *argv, "--json")
    assert status == 0, err
    return json.loads(out)


def produce(servers: str, topic: str, per_level: int) -> None:
    with PriorityProducer(bootstrap_servers=servers, max_priority=3) as producer:
        for level in range(3):
            for i in range(per_level):
                producer.send(topic, b"x", key=str(i % 7).encode(), priority=level)


@pytest.mark.integration
def test_run_handles_records_and_commits_on_sigterm(bootstrap_servers, unique_name, tmp_path):
    """Every record is handled; SIGTERM stops the service with exit 0 and all offsets committed."""
    topic, group = unique_name("orders"), unique_name("g")
    create_priority_topics(bootstrap_servers, topic, 3)
    produce(bootstrap_servers, topic, 100)
    out = tmp_path / "handled.txt"
    process = subprocess.Popen(
        [sys.executable, "-m", "priority_kafka", "run", "cli_handler:handle", "-t", topic,
         "-b", bootstrap_servers, "-g", group, "--max-priority", "3", "--shards", "4"],
        env={**os.environ, "CLI_HANDLER_OUT": str(out), "PYTHONPATH": str(TESTS)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().splitlines()) >= 300:
                break
            assert process.poll() is None, process.stderr.read()
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
    handled = out.read_text().splitlines()
    assert len(set(handled)) == 300
    check = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=f"{group}-1")
    try:
        assert check.committed(TopicPartition(f"{topic}-1", 0)) == 100
    finally:
        check.close()


@pytest.mark.integration
def test_topics_create_describe_delete(bootstrap_servers, unique_name, capsys):
    """`topics` creates every level, describes partitions and end offsets, and deletes them."""
    topic = unique_name("t")
    created = json_of(capsys, "topics", "create", topic, "-n", "3", "--partitions", "2",
                      "-b", bootstrap_servers)
    assert created["topics"] == [f"{topic}-2", f"{topic}-1", f"{topic}-0"]
    produce(bootstrap_servers, topic, 5)
    described = json_of(capsys, "topics", "describe", topic, "-b", bootstrap_servers)
    assert [level["level"] for level in described["levels"]] == [2, 1, 0]
    for level in described["levels"]:
        assert len(level["partitions"]) == 2
        assert sum(p["end"] for p in level["partitions"]) == 5
    deleted = json_of(capsys, "topics", "delete", topic, "-b", bootstrap_servers)
    assert sorted(deleted["deleted"]) == sorted(created["topics"])


@pytest.mark.integration
def test_produce_consume_lag_and_metrics_endpoint(bootstrap_servers, unique_name, capsys):
    """`produce` follows the priority mix; `consume` handles everything while its Prometheus
    endpoint serves every documented name; `lag` then reports zero on every level."""
    topic, group = unique_name("t"), unique_name("g")
    run_cli(capsys, "topics", "create", topic, "-n", "3", "-b", bootstrap_servers)
    sent = json_of(capsys, "produce", topic, "-n", "3", "--count", "1200", "--priority-mix",
                   "0,1,3", "--keys", "20", "-b", bootstrap_servers)
    assert sent["records"] == 1200 and sent["per_level"]["0"] == 0
    assert 800 < sent["per_level"]["2"] < 1000  # three quarters of 1200, drawn at random
    port = 9300 + os.getpid() % 500
    result: dict[str, int] = {}

    def consume() -> None:
        result["status"] = main([
            "consume", "cli_handler:gated", "-t", topic, "-g", group, "-n", "3",
            "-b", bootstrap_servers, "--max-records", "1200", "--duration", "60",
            "--metrics-port", str(port), "--quiet",
            "--budget", "downstream=1000000",  # so the budget metrics have samples too
        ])

    sys.path.insert(0, str(TESTS))
    import cli_handler

    cli_handler.arm_gate()
    thread = threading.Thread(target=consume)
    thread.start()
    try:
        scraped = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and thread.is_alive():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    scraped = r.read().decode()
            except OSError:
                scraped = ""
            if "priority_kafka_consumer_lag_records{" in scraped and \
                    "priority_kafka_record_latency_seconds_bucket{" in scraped:
                break
            time.sleep(0.1)
    finally:
        cli_handler.SCRAPED.set()
        thread.join(90)
        sys.path.remove(str(TESTS))
    assert result["status"] == 0
    assert re.search(r"stopped after \d+\.\d s: handled 1200 \(\d+ records/s\)",
                     capsys.readouterr().out)
    names = {line.split("{")[0].split(" ")[0] for line in scraped.splitlines()
             if line and not line.startswith("#")}
    for name, (kind, _, _) in PROMETHEUS_METRICS.items():
        expected = f"{name}_count" if kind == "histogram" else name
        assert expected in names, f"{expected} missing from the scrape"
    lag = json_of(capsys, "lag", topic, "-g", group, "-n", "3", "-b", bootstrap_servers)
    assert lag["total"] == 0 and len(lag["partitions"]) == 3


@pytest.mark.integration
def test_plan_recommendation_follows_from_its_measurements(bootstrap_servers, capsys):
    """`plan` recommends ceil(level target / min(producer, consumer rate)) partitions per level,
    ceil(target x handler time) shards, and processes from what one executor process measured:
    ceil(target / process rate), with at least one partition per process on every level (the
    levels' groups assign independently: fewer could leave a process idle)."""
    plan = json_of(capsys, "plan", "-b", bootstrap_servers, "--target", "150000",
                   "--priority-mix", "6,3,1", "--handler-ms", "2", "--measure-seconds", "1")
    measured = plan["measured"]
    assert measured["producer_records_per_s"] > 0 and measured["consumer_records_per_s"] > 0
    assert measured["executor_shards"] == min(256, math.ceil(150000 * 0.002))  # --max-shards
    assert 0 < measured["executor_records"] <= measured["records"]
    process_rate = measured["executor_records_per_s"]
    # 256 shards of 2 ms cannot exceed 128k/s; the process is CPU-bound below that.
    assert 0 < process_rate < 150000
    processes = math.ceil(150000 / process_rate)
    assert plan["processes"] == processes >= 2
    per_partition = min(measured["producer_records_per_s"], measured["consumer_records_per_s"])
    assert plan["per_partition_records_per_s"] == per_partition
    for level, share in ((0, 0.6), (1, 0.3), (2, 0.1)):
        expected = max(processes, math.ceil(150000 * share / per_partition))
        assert plan["levels"][str(level)]["partitions"] == expected
    assert plan["shards"] == math.ceil(150000 * 0.002)
    assert plan["shards_per_process"] == min(256, math.ceil(150000 / processes * 0.002))
    assert len(plan["arithmetic"]) >= 6


def test_consume_imports_the_handler_from_the_current_directory_or_app_dir(tmp_path, capsys,
                                                                          monkeypatch):
    """`consume` finds `module:function` in the current directory (as uvicorn does) and in
    --app-dir; a module found in neither is one line naming the directory."""
    from priority_kafka.cli._common import load_handler

    (tmp_path / "handlers_here.py").write_text("def handle(record):\n    return record\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "handlers_here", raising=False)
    assert load_handler("handlers_here:handle")(7) == 7
    elsewhere = tmp_path / "app"
    elsewhere.mkdir()
    (elsewhere / "handlers_there.py").write_text("def handle(record):\n    return -record\n")
    monkeypatch.chdir(tmp_path.parent)
    monkeypatch.delitem(sys.modules, "handlers_there", raising=False)
    assert load_handler("handlers_there:handle", str(elsewhere))(7) == -7
    status, _, err = run_cli(capsys, "consume", "handlers_nowhere:handle", "-t", "t", "-g", "g",
                             "-b", "127.0.0.1:1", "--app-dir", str(elsewhere))
    assert status == 2 and "cannot load handler 'handlers_nowhere:handle'" in err
    assert str(elsewhere) in err and len(err.strip().splitlines()) == 1


@pytest.mark.integration
def test_demo_runs_and_writes_its_chart(bootstrap_servers, tmp_path, capsys):
    """A short `demo` handles urgent records faster than the backlog and writes its chart."""
    summary = json_of(capsys, "demo", "-b", bootstrap_servers, "--duration", "4", "--out",
                      str(tmp_path), "--quiet")
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    levels = summary["levels"]
    assert levels["2"]["handled"] == levels["2"]["sent"] > 0
    assert levels["2"]["p50_ms"] < levels["0"]["p50_ms"]
    written = json.loads((tmp_path / "demo.json").read_text())
    assert set(written["per_second"]) == {"2", "1", "0"}


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_bench_runs_a_named_benchmark(bootstrap_servers, tmp_path, capsys):
    """`bench distributors --smoke` writes the benchmark's JSON, its chart and a summary."""
    status, _, err = run_cli(capsys, "bench", "distributors", "--smoke", "-b",
                               bootstrap_servers, "--out", str(tmp_path))
    assert status == 0, err
    document = json.loads((tmp_path / "distributors.json").read_text())
    assert len(document["results"]) == 6
    for levels in document["results"].values():
        assert set(levels) == {"2", "1", "0"}
    assert (tmp_path / "distributors.png").stat().st_size > 0
    assert "distributors.png" in (tmp_path / "summary.md").read_text()


def test_bench_list_names_the_distributor_comparison(capsys):
    """`bench --list` finds the benchmarks of the source tree."""
    status, out, _ = run_cli(capsys, "bench", "--list")
    assert status == 0 and "distributors" in out and "burst" in out


def test_every_command_has_help_with_an_example():
    """Each command's --help shows an example command line."""
    for command in ("demo", "broker", "topics", "produce", "consume", "run", "lag", "plan",
                    "bench"):
        done = subprocess.run([sys.executable, "-m", "priority_kafka", command, "--help"],
                              capture_output=True, text=True, check=False, timeout=60)
        assert done.returncode == 0 and "example:\n  priority-kafka" in done.stdout, command


BAD_INPUT = [
    (["produce", "orders"], "required"),
    (["plan", "--target", "-5"], "--target"),
    (["produce", "orders", "-n", "3", "--priority-mix", "1,2", "-b", "{servers}"], "3 weights"),
    (["produce", "orders", "-n", "3", "--priority-mix", "a,b", "-b", "{servers}"], "numbers"),
    (["topics", "describe", "no-such-topic", "-b", "{servers}"], "no priority topics"),
    (["consume", "no_such_module:f", "-t", "t", "-g", "g", "-b", "x:1"], "cannot load handler"),
    (["bench", "no_such_benchmark"], "unknown benchmark"),
    (["demo", "--duration", "1"], "at least 3"),
    (["no-such-command"], "invalid choice"),
    # A setting is named as the flag that sets it, not as the Python field.
    (["consume", "cli_handler:slow", "-t", "bad-input", "-g", "g", "-b", "{servers}",
      "--failure-policy", "dead_letter"],
     "--dead-letter-topic must be a topic name when --failure-policy is 'dead_letter'"),
    (["consume", "cli_handler:slow", "-t", "bad-input", "-g", "g", "-n", "3", "-b", "{servers}",
      "-c", "max.pol.records=5"],
     "'max.pol.records' is not a PriorityConsumer setting; did you mean 'max.poll.records'?"),
    (["consume", "cli_handler:slow", "-t", "bad-input", "-g", "g", "-b", "{servers}",
      "-c", "max.pol.records=5"],
     "'max.pol.records' is not a PriorityConsumer setting; did you mean 'max.poll.records'?"),
    (["consume", "cli_handler:slow", "-t", "bad-input", "-g", "g", "-n", "3", "-b", "{servers}",
      "-c", "enable.auto.commit=maybe"], "'enable.auto.commit' must be true or false"),
    # kafka-python's own KafkaConfigurationError was exit status 1
    (["consume", "cli_handler:slow", "-t", "bad-input", "-g", "g", "-b", "{servers}",
      "-c", "isolation_level=maybe"], "error: Unrecognized isolation_level"),
    (["consume", "cli_handler:slow", "-t", "bad-input", "-g", "g", "-n", "3", "-b", "{servers}",
      "--client", "confluent", "-c", "fetch.max.wait.ms=100"],
     "No such configuration property: 'fetch.max.wait.ms'; did you mean 'fetch.wait.max.ms'?"),
    # librdkafka's KafkaException(_INVALID_ARG) was exit status 1, printed as KafkaError{...}
    (["consume", "cli_handler:slow", "-t", "bad-input", "-g", "g", "-b", "{servers}",
      "--client", "confluent", "-c", "auto.offset.reset=sometime"],
     'error: Invalid value "sometime" for configuration property "auto.offset.reset"'),
    (["consume", "cli_handler:slow", "-t", "bad-input", "-g", "g", "-b", "{servers}",
      "-c", "@/no/such/file.properties"], "no such properties file '/no/such/file.properties'"),
    (["consume", "cli_handler:slow", "-t", "bad-input", "-g", "g", "-b", "{servers}",
      "-c", "max.priority=three"], "-c max.priority: expected an integer (got 'three')"),
    (["consume", "cli_handler:slow", "-t", "bad topic!", "-g", "g", "-n", "3", "-b", "{servers}"],
     "error: --topic must be non-empty"),
    # An --out that cannot be created was exit status 1 (FileNotFoundError), for demo only
    # after the whole run.
    (["demo", "--out", "/proc/no-such-dir", "-b", "{servers}", "--duration", "3", "-q"],
     "error: --out '/proc/no-such-dir' cannot be created: No such file or directory"),
    (["bench", "--out", "/proc/no-such-dir", "--smoke", "-b", "{servers}", "consumer_overhead"],
     "error: --out '/proc/no-such-dir' cannot be created"),
    # A value the broker refuses was exit status 1 with a request dump.
    (["topics", "create", "refused", "-n", "3", "-b", "{servers}", "-c", "retention.ms=abc"],
     "error: the broker refused it (InvalidConfigurationError): Invalid value abc for "
     "configuration retention.ms: Not a number of type LONG"),
]


@pytest.mark.integration
@pytest.mark.parametrize(("argv", "says"), BAD_INPUT, ids=[" ".join(a[:2]) for a, _ in BAD_INPUT])
def test_bad_input_exits_2_with_one_line(argv, says, bootstrap_servers, capsys, monkeypatch):
    """Bad input ends with status 2 (docs/cli.md) and exactly one line on stderr, naming the
    problem as the command line spells it (on a topic whose levels exist, so what is said is
    the input's fault, not the broker's)."""
    from priority_kafka import create_priority_topics

    create_priority_topics(bootstrap_servers, "bad-input", 3)  # those that exist are kept
    monkeypatch.syspath_prepend(str(TESTS))
    status, _, err = run_cli(capsys, *(a.format(servers=bootstrap_servers) for a in argv))
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert says in err


def test_a_handler_module_that_does_not_import_is_framed_with_its_file_and_line(
    tmp_path, capsys
):
    """A syntax error (or an exception) in the handler's module is "cannot load handler",
    naming the file and line, exit 2; it was a bare SyntaxError with exit status 1."""
    (tmp_path / "broken_syntax.py").write_text("def handle(record):\n    return (\n")
    (tmp_path / "broken_import.py").write_text("x = 1\nraise RuntimeError('no config')\n")
    for module, says in (
        ("broken_syntax", f"'(' was never closed at {tmp_path}/broken_syntax.py, line 2"),
        ("broken_import", "importing it raised RuntimeError('no config') at "
                          f"{tmp_path}/broken_import.py, line 2"),
    ):
        status, _, err = run_cli(capsys, "consume", f"{module}:handle", "--app-dir",
                                 str(tmp_path), "-t", "t", "-g", "g", "-b", "127.0.0.1:1")
        assert status == 2, err
        assert err.strip() == (f"priority-kafka consume: error: cannot load handler "
                               f"'{module}:handle': {says}")


@pytest.mark.integration
@pytest.mark.parametrize("client", NAMES)
def test_consume_takes_settings_as_text_and_from_a_properties_file(
    client, bootstrap_servers, unique_name, tmp_path, capsys, monkeypatch
):
    """`-c max.poll.records=50 -c session.timeout.ms=10000` and the fetch wait are values
    (each failed before: "must be an int (got '50')", a TypeError), and `--config-file`
    reads a .properties file, whose max.priority stands for --max-priority."""
    topic = unique_name("t")
    create_priority_topics(bootstrap_servers, topic, 3)
    produce(bootstrap_servers, topic, 20)
    # The fetch wait as the client spells it (librdkafka's name differs).
    (fetch_wait,) = family(client).settings_of({"fetch.max.wait.ms": 100}, "kafka-python")
    path = tmp_path / "consumer.properties"
    path.write_text(f"# the levels\nmax.priority: 3\n{fetch_wait} = 100\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("CLI_HANDLER_OUT", str(tmp_path / "handled.txt"))
    summary = json_of(
        capsys, "consume", "cli_handler:handle", "-t", topic, "-g", unique_name("g"),
        "-b", bootstrap_servers, "--client", client, "--max-records", "60", "--duration", "60",
        "-c", "max.poll.records=50", "-c", "session.timeout.ms=10000", "--config-file", str(path),
    )
    assert summary["executor"]["handled"] == 60
    handled = (tmp_path / "handled.txt").read_text().split("\n")[:-1]
    assert sorted({line.split()[0] for line in handled}) == [f"{topic}-{n}" for n in range(3)]


@pytest.mark.integration
def test_a_failing_handler_under_stop_says_how_to_dead_letter(
    bootstrap_servers, unique_name, tmp_path, capsys
):
    """The stop policy's failure is exit status 1 (not bad input) and names the flags that
    dead-letter the record instead."""
    topic = unique_name("t")
    create_priority_topics(bootstrap_servers, topic, 3)
    produce(bootstrap_servers, topic, 1)
    (tmp_path / "failing_handler.py").write_text("def handle(record):\n    raise ValueError(7)\n")
    status, _, err = run_cli(
        capsys, "consume", "failing_handler:handle", "--app-dir", str(tmp_path), "-t", topic,
        "-n", "3", "-g", unique_name("g"), "-b", bootstrap_servers, "--max-attempts", "1", "-q",
    )
    assert status == 1
    assert re.fullmatch(
        r"priority-kafka consume: error: HandlerError: handler failed on .*-\d\[0\]@0 \('stop' "
        r"policy\): ValueError\(7\) after 1 attempt\(s\); to dead-letter a failing record and "
        r"go on instead, add --failure-policy dead_letter --dead-letter-topic TOPIC",
        err.strip().splitlines()[-1]), err


@pytest.mark.integration
def test_topics_describe_and_delete_take_max_priority(bootstrap_servers, unique_name, capsys):
    """`topics describe -n` (like `create -n`) reads exactly the given levels, naming the
    missing ones or those beyond."""
    topic = unique_name("t")
    run_cli(capsys, "topics", "create", topic, "-n", "3", "-b", bootstrap_servers)
    described = json_of(capsys, "topics", "describe", topic, "-n", "3", "-b", bootstrap_servers)
    assert [level["level"] for level in described["levels"]] == [2, 1, 0]
    status, _, err = run_cli(capsys, "topics", "describe", topic, "-n", "4",
                             "-b", bootstrap_servers)
    assert status == 2 and f"topics {topic}-3 do not exist; create them with" in err
    status, _, err = run_cli(capsys, "topics", "delete", topic, "-n", "2",
                             "-b", bootstrap_servers)
    assert status == 2 and f"{topic}-2 exist beyond --max-priority 2" in err
    assert json_of(capsys, "topics", "delete", topic, "-n", "3", "-b", bootstrap_servers)[
        "deleted"] == [f"{topic}-2", f"{topic}-1", f"{topic}-0"]


def test_live_view_status_line_spans_the_terminal():
    """On a terminal the status line is one line as wide as the terminal allows: as the
    table's title it wrapped at the table's width (about 75 columns)."""
    from rich.console import Console

    from priority_kafka.cli._view import LiveView
    from priority_kafka.cli.consume import VIEW_COLUMNS

    status = ("consume | in flight 120, queued 40, running 16, paused 2, retries 0, "
              "dead-lettered 0, commits 12")
    view = LiveView(VIEW_COLUMNS, lambda: [(2, 10, 5, 29, 29, 0, 0, 1, 2)], lambda: status)
    wide = Console(width=160, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    wide.print(view.renderable())
    lines = wide.export_text().splitlines()
    assert lines[0].rstrip() == status
    assert max(len(line.rstrip()) for line in lines[1:]) < len(status)  # the table is narrower
    narrow = Console(width=60, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    narrow.print(view.renderable())
    assert all(len(line) <= 60 for line in narrow.export_text().splitlines())


def test_plan_recommendation_names_each_levels_partitions():
    """The last line of `plan` (it read "partitions per level level 2: 2, ...")."""
    from priority_kafka.cli.plan import recommendation

    result = {"processes": 2, "shards_per_process": 50,
              "levels": {2: {"partitions": 2}, 1: {"partitions": 3}, 0: {"partitions": 4}}}
    assert recommendation(result) == (
        "recommendation: 2 consumer process(es), each ShardedExecutor(shards=50); "
        "partitions: 2 for level 2, 3 for level 1, 4 for level 0")


def test_live_view_prints_plain_lines_without_a_terminal(capsys):
    """Without a terminal the live view prints one line per row every period."""
    from priority_kafka.cli._view import LiveView

    with LiveView(("level", "rate"), lambda: [(2, 10), (0, 5)], lambda: "title",
                  plain_every_s=0.05):
        time.sleep(0.3)
    out = capsys.readouterr().out
    assert "title" in out and "  level=2 rate=10" in out and "  level=0 rate=5" in out


@pytest.mark.integration
def test_consume_on_the_confluent_client(bootstrap_servers, unique_name, capsys):
    """`consume --client confluent` runs the executor on a confluent PriorityConsumer and
    handles every record."""
    topic, group = unique_name("t"), unique_name("g")
    run_cli(capsys, "topics", "create", topic, "-n", "3", "-b", bootstrap_servers)
    json_of(capsys, "produce", topic, "-n", "3", "--count", "300", "-b", bootstrap_servers)
    sys.path.insert(0, str(TESTS))
    try:
        summary = json_of(
            capsys, "consume", "cli_handler:slow", "-t", topic, "-g", group, "-n", "3",
            "--client", "confluent", "-b", bootstrap_servers, "--max-records", "300",
            "--duration", "60",
        )
    finally:
        sys.path.remove(str(TESTS))
    assert summary["executor"]["handled"] == 300


@pytest.mark.parametrize("levels", [["-n", "3"], []])
def test_consume_refuses_a_broker_owned_property_beside_the_consumer_protocol(capsys, levels):
    """`consume --client confluent -c group.protocol=consumer -c session.timeout.ms=...`
    exits 2 naming the property, with or without priority levels, before connecting."""
    status, _, err = run_cli(
        capsys, "consume", "cli_handler:slow", "-t", "t", "-g", "g", *levels,
        "--client", "confluent", "-b", "127.0.0.1:1",
        "-c", "group.protocol=consumer", "-c", "session.timeout.ms=10000",
    )
    assert status == 2
    assert "'session.timeout.ms' cannot be set with 'group.protocol': 'consumer'" in err


def test_the_maven_note_shows_only_when_maven_resolves_the_jars(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A first run says Maven resolves the broker's jars; a run with them cached does not."""
    from priority_kafka.cli._common import note_jar_resolution
    from priority_kafka.testing import KAFKA_VERSION, broker_jars

    broker_jars()  # the session's cache, resolved
    note_jar_resolution()
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("PRIORITY_KAFKA_CACHE", str(tmp_path / "empty"))
    note_jar_resolution()
    assert capsys.readouterr().err == (
        f"resolving Apache Kafka {KAFKA_VERSION}'s jars with Maven (once, into "
        f"{tmp_path / 'empty'}) ...\n")


def test_broker_refuses_a_taken_port_at_once_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    """``broker --port`` on a port another process holds fails before any JVM starts."""
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        assert main(["broker", "--port", str(port)]) == 1
        took = time.monotonic() - started
    err = capsys.readouterr().err
    assert f"Port {port} on 127.0.0.1 is taken" in err and f"sport = :{port}" in err, err
    assert took < 5, took
    with pytest.raises(SystemExit) as exited:
        main(["broker", "--port", "70000"])
    assert exited.value.code == 2
    assert "argument --port: must be a TCP port, 1 to 65535 (got 70000)" in capsys.readouterr().err
    assert main(["broker", "--port", "9092", "--brokers", "3"]) == 2
    assert "--port 9092 is for a single broker" in capsys.readouterr().err
