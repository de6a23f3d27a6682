"""The public API is exactly what priority_kafka/__init__.py declares."""

import priority_kafka


def test_all_names_exactly_the_public_members():
    """__all__ lists every public name of the package and nothing that does not exist."""
    def is_submodule(value):
        return getattr(value, "__name__", "").startswith("priority_kafka.")

    public = {
        name for name, value in vars(priority_kafka).items()
        if not name.startswith("_") and not is_submodule(value)
    }
    assert set(priority_kafka.__all__) == public
    assert all(hasattr(priority_kafka, name) for name in priority_kafka.__all__)
