"""Mutated HLO dumps, for the HLO importer's fuzz (tests/frontend/hlo/test_fuzz.py) and the
differential fuzz's HLO part (fuzz_programs.py): the stored dumps, split into tokens, with
tokens deleted, duplicated, swapped, the text truncated and random bytes or HLO-like noise
spliced in.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from tests.frontend.hlo.helpers import data_files

_PIECES = re.compile(r"\s+|%?[\w.\-]+|\"[^\"\n]*\"|.", re.DOTALL)
_NOISE = ["{", "}", "(", ")", "[", "]", ",", "=", "%", "ROOT", "ENTRY", "->", "\"", "/*", ":",
          "f32[", "(f32[], s32[])", "tuple(", "fusion(", "calls=%", "\x00", "\u00e9", "\n", "-1",
          "99999999999999999999", "{...}", "parameter(", "dimensions={", "to_apply="]


def _tokens(text: str) -> list[str]:
    return _PIECES.findall(text)


def _mutate(rng: random.Random, toks: list[str]) -> str:
    toks = list(toks)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        kind = rng.randrange(7)
        i = rng.randrange(len(toks)) if toks else 0
        if not toks:
            toks = [rng.choice(_NOISE)]
        elif kind == 0:
            del toks[i]
        elif kind == 1:
            toks.insert(i, toks[i])
        elif kind == 2:
            j = rng.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
        elif kind == 3:
            toks = toks[:i]
        elif kind == 4:
            toks.insert(i, rng.choice(_NOISE))
        elif kind == 5:
            toks.insert(i, "".join(chr(rng.randrange(256)) for _ in range(rng.randrange(1, 6))))
        else:
            j = rng.randrange(len(toks))
            toks[i] = toks[j]
    return "".join(toks)


def mutated_dumps(n: int, seed: int = 8) -> Iterator[str]:
    """`n` mutations of the stored HLO dumps (tests/frontend/hlo/data), the same for a seed."""
    corpus = [_tokens(p.read_text()) for p in data_files()]
    rng = random.Random(seed)
    for _ in range(n):
        yield _mutate(rng, rng.choice(corpus))
