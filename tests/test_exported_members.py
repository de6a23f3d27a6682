"""The public API is exactly what priority_kafka/__init__.py declares."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

from test_pure_core_imports import PURE_MODULES

import priority_kafka


def test_all_names_exactly_the_public_members():
    """__all__ lists every public name of the package (those loaded on first use included) and
    nothing that does not exist."""
    def is_submodule(value):
        return getattr(value, "__name__", "").startswith("priority_kafka.")

    public = {
        name for name in dir(priority_kafka)
        if not name.startswith("_") and not is_submodule(getattr(priority_kafka, name))
    }
    assert set(priority_kafka.__all__) == public
    assert all(hasattr(priority_kafka, name) for name in priority_kafka.__all__)


def test_importing_the_package_loads_kafka_python_only_when_a_name_needs_it():
    """``import priority_kafka`` (which every submodule's import runs) does not load
    kafka-python; the first use of a name that needs it does, and gets the real object."""
    code = (
        "import sys, priority_kafka\n"
        "before = 'kafka' in sys.modules\n"
        "from priority_kafka import PriorityConsumer\n"
        "from priority_kafka.consumer import PriorityConsumer as Real\n"
        "print(before, 'kafka' in sys.modules, PriorityConsumer is Real)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True", "True"]


def _building_blocks() -> str:
    """docs/api.md's "Building blocks" section."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    return text.split("## Building blocks", 1)[1].split("\n## ", 1)[0]


def test_every_name_of_a_pure_module_is_public_api_or_a_documented_building_block():
    """A name a pure module exports (``__all__``) is one of ``priority_kafka``'s names, or
    docs/api.md's building-blocks table names it in its module's row; every module of that
    table is a pure module, and every ``:::`` entry there is a name its module exports."""
    section = _building_blocks()
    rows = dict(re.findall(r"^\| `priority_kafka\.(\w+)` \|(.*)$", section, re.M))
    pure = [name for name in PURE_MODULES if "." not in name and not name.startswith("_")]
    assert set(rows) <= set(pure)
    for module_name in pure:
        module = importlib.import_module(f"priority_kafka.{module_name}")
        undocumented = [
            name for name in module.__all__
            if name not in priority_kafka.__all__
            and f"`{name}`" not in rows.get(module_name, "")
        ]
        assert undocumented == [], f"priority_kafka.{module_name}"
    for module_name, name in re.findall(r"^::: priority_kafka\.(\w+)\.(\w+)$", section, re.M):
        assert name in importlib.import_module(f"priority_kafka.{module_name}").__all__


def test_a_confluent_executor_never_imports_kafka_python():
    """kafka-python's import costs a process about 13 MB: the executor's core and the confluent
    adapter use client-neutral partitions, and a ShardedExecutor over a confluent consumer
    (built, not run) loads no kafka-python."""
    code = (
        "import sys\n"
        "from confluent_kafka import Consumer\n"
        "from priority_kafka.executor import ShardedExecutor\n"
        "consumer = Consumer({'bootstrap.servers': '127.0.0.1:9', 'group.id': 'g'})\n"
        "executor = ShardedExecutor(consumer, lambda record: None, shards=2)\n"
        "consumer.close()\n"
        "print('kafka' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.split() == ["False"]


def test_the_neutral_partitions_are_interchangeable_with_kafka_pythons():
    """The core's TopicPartition and OffsetAndMetadata equal and hash as kafka-python's, so
    a dict keyed by one finds the other; its adapter converts them for kafka-python's calls."""
    import kafka

    from priority_kafka import _structs
    from priority_kafka.kafka_python._kafka import kafka_offsets, kafka_partitions

    ours, theirs = _structs.TopicPartition("t", 1), kafka.TopicPartition("t", 1)
    assert ours == theirs and hash(ours) == hash(theirs) and {theirs: 1}[ours] == 1
    assert repr(ours) == repr(theirs)
    assert _structs.OffsetAndMetadata(5) == kafka.OffsetAndMetadata(5, "", -1)
    converted = kafka_offsets({ours: _structs.OffsetAndMetadata(5, "m", -1)})
    [(tp, meta)] = converted.items()
    assert type(tp) is kafka.TopicPartition and type(meta) is kafka.OffsetAndMetadata
    assert (tp, meta) == (theirs, (5, "m", -1))
    assert all(type(tp) is kafka.TopicPartition for tp in kafka_partitions([ours, theirs]))
