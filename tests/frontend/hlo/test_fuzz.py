"""Mutation fuzzing of the HLO importer: mutated dumps (tokens deleted, duplicated, swapped,
text truncated, random bytes spliced in) must import or raise ParseError, never anything
else, and never hang. What imports must verify and print/parse round-trip.

The normal run tries a few thousand cases; GAMBIT_FUZZ=full (`make fuzz`) tries 100,000.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

import explorer as gx
from tests.corpora.hlo_mutations import mutated_dumps
from tests.frontend.hlo.helpers import check_imported, data_files

CASES = 100_000 if os.environ.get("GAMBIT_FUZZ") == "full" else 3_000
SECONDS_PER_CASE = 5.0
class _Hang(Exception):
    pass


def _with_deadline(seconds: float, fn: Callable[[], object]) -> object:
    def expire(signum: int, frame: object) -> None:
        raise _Hang

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _import(text: str) -> None:
    try:
        g = gx.from_hlo(text)
    except gx.ParseError as e:
        assert e.line >= 1 and e.column >= 1
        return
    check_imported(g)


@pytest.mark.fuzz
def test_mutated_dumps_raise_only_parse_error() -> None:
    imported = 0
    for k, text in enumerate(mutated_dumps(CASES)):
        try:
            _with_deadline(SECONDS_PER_CASE, lambda text=text: _import(text))
        except _Hang:
            pytest.fail(f"case {k} took over {SECONDS_PER_CASE} s:\n{text[:2000]}")
        except Exception as e:
            raise AssertionError(f"case {k} raised {type(e).__name__}: {e}\n{text[:3000]}") from e
        imported += 1
    assert imported == CASES


def test_mutations_do_mutate() -> None:
    """The fuzzer's own check: most cases differ from every corpus file, and some import."""
    originals = {p.read_text() for p in data_files()}
    cases = list(mutated_dumps(200, seed=1))
    assert sum(c not in originals for c in cases) > 150
    ok = 0
    for c in cases:
        try:
            gx.from_hlo(c)
            ok += 1
        except gx.ParseError:
            pass
    assert 10 < ok < 200
