"""Shared fixtures: one real Apache Kafka broker for the whole session (priority_kafka.testing)."""

pytest_plugins = ["priority_kafka.pytest_plugin"]
