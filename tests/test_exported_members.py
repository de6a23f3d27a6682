"""The public API is exactly what priority_kafka/__init__.py declares."""

import subprocess
import sys

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
