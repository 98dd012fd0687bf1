"""CompileOptions: user-facing limits, per device too."""

from __future__ import annotations

import pytest

from explorer.options import CompileOptions, parse_limit


@pytest.mark.parametrize("given,want", [
    ("16MiB/device", (16 * 2**20, True)), ("16 MiB per device", (16 * 2**20, True)),
    ("1KiB / Device", (1024, True)), ("16MiB", (16 * 2**20, False)), (4096, (4096, False)),
])
def test_a_limit_may_be_per_device(given: object, want: tuple[int, bool]) -> None:
    assert parse_limit(given) == want  # type: ignore[arg-type]


def test_make_sets_and_clears_per_device() -> None:
    each = CompileOptions.make("2MiB/device")
    assert (each.memory_limit, each.per_device) == (2 * 2**20, True)
    assert each.describe() == "memory limit 2.0 MiB per device, backend reference"
    again = CompileOptions.make(4096, base=each)  # a plain limit is the whole program's
    assert (again.memory_limit, again.per_device) == (4096, False)
    assert CompileOptions.make(backend="cpu", base=each).per_device


@pytest.mark.parametrize("bad", ["lots/device", "/device", "-1MiB per device"])
def test_a_bad_per_device_limit_names_the_value(bad: str) -> None:
    with pytest.raises(ValueError, match=f"memory limit '{bad}': .*byte size"):
        parse_limit(bad)
