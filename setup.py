"""Only the optional C routing of confluent PriorityProducer.produce; the rest is in setup.cfg."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        # optional: without a C compiler the package installs and produce() runs in Python.
        Extension(
            "priority_kafka.confluent._routing",
            ["priority_kafka/confluent/_routing.c"],
            optional=True,
        )
    ]
)
