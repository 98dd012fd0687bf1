"""explorer/reproducer.py: a reproducer script written before measure/ existed imports its
helpers from there, and they are measure/'s own."""

from explorer import reproducer
from explorer.measure import inputs
from explorer.measure import reproducer as current


def test_an_old_scripts_imports_are_measures_helpers() -> None:
    assert reproducer.random_inputs is inputs.random_inputs
    for name in ("bind_opaque", "compare", "not_finite"):
        assert getattr(reproducer, name) is getattr(current, name)
