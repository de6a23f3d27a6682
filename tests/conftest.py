"""Shared fixtures: one real Apache Kafka broker for the whole session (priority_kafka.testing)."""

pytest_plugins = ["priority_kafka.pytest_plugin"]


def pytest_addoption(parser):
    group = parser.getgroup("faults", "the fault suite (tests/faults, docs/reliability.md)")
    group.addoption(
        "--faults-full", action="store_true", default=False,
        help="run the fault scenarios at full size (also PRIORITY_KAFKA_FAULTS_FULL=1); "
             "the default is the reduced size the normal suite runs",
    )
    group.addoption(
        "--faults-json", default=None, metavar="PATH",
        help="append each fault scenario's figures to this JSON file "
             "(also PRIORITY_KAFKA_FAULTS_JSON)",
    )
