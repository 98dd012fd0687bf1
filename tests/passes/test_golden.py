"""Golden tests: tests/passes/<pass-name>.txt (or <pass-name>.<topic>.txt, say
simplify.control-flow.txt) holds cases of input IR, a line
`// ----- expected`, and the expected output IR; cases are separated by lines that start
with `// ===== case` (the rest of the line names the case). An optional line
`// fired: rule@file:line rule@file:line ...` in the expected part lists the rewrites the
pass must log, in order (`rule@file:line@%3.body` for one inside a control-flow body).
An optional line `// remarks: rule@file:line ...` in the expected part lists the remarks
(explorer/ir/remarks.py) the pass must make, in any order, in the same form; an empty one
says it makes none.
An optional line `// options: key=value ...` in the input part sets
options of the pass (the split pass's memory_limit=98304; backend=jax: an integer where the
value is one, else the text). Each case checks the output
text, the verifier, the print/parse round trip and, for passes that run to a fixed point,
that a second run changes nothing."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import explorer as gx
from explorer.ir import parse, verify

HERE = Path(__file__).parent
CASE = re.compile(r"^// ===== case(.*)$", re.M)
EXPECTED = re.compile(r"^// ----- expected\s*$", re.M)
FIRED = re.compile(r"^// fired:(.*)$", re.M)
REMARKS = re.compile(r"^// remarks:(.*)$", re.M)
OPTIONS = re.compile(r"^// options:(.*)$", re.M)  # e.g. `// options: memory_limit=98304`


def _pass_name(path: Path) -> str:
    return path.name.split(".")[0]


def _cases() -> list[tuple[str, str, str, str]]:
    out = []
    for path in sorted(HERE.glob("*.txt")):
        chunks = CASE.split(path.read_text())
        titles = ["", *chunks[1::2]]
        for k, (title, body) in enumerate(zip(titles, chunks[0::2], strict=True)):
            if not body.strip():
                continue
            parts = EXPECTED.split(body)
            assert len(parts) == 2, f"{path.name} case {k}: needs one '// ----- expected' line"
            out.append((_pass_name(path), f"{path.stem}:{k}:{title.strip(' :') or 'case'}",
                        *parts))
    return out


CASES = _cases()
IDEMPOTENT = {"simplify", "cse", "dce"}


def test_every_golden_file_names_a_registered_pass() -> None:
    for path in HERE.glob("*.txt"):
        assert _pass_name(path) in gx.passes.names(), f"{path.name}: no pass named {path.stem!r}"


@pytest.mark.parametrize("pass_name,case,given,expected", CASES, ids=[c[1] for c in CASES])
def test_golden(pass_name: str, case: str, given: str, expected: str) -> None:
    p = gx.passes.get(pass_name)
    options = OPTIONS.search(given)
    if options:  # the pass's dataclass fields, as key=value pairs (an int where it is one)
        p = dataclasses.replace(p, **{k: int(v) if v.lstrip("-").isdigit() else v for k, v in
                                      (kv.split("=") for kv in options.group(1).split())})
    before = verify(parse(given))
    after, report = p(before)
    verify(after)
    assert str(after) == str(parse(expected)), f"{case}: output differs"
    assert parse(str(after)) == after
    assert report.changed == (after != before)
    fired = FIRED.search(expected)
    if fired:
        want = fired.group(1).split()
        got = [(f"{r.rule}@{r.source}" if r.source else r.rule) + (f"@{r.region}" if r.region
                                                                    else "")
               for r in report.rewrites]
        assert got == want, f"{case}: rewrites logged"
    remarks = REMARKS.search(expected)
    if remarks:
        said = [(f"{r.rule}@{r.source}" if r.source else r.rule) + (f"@{r.region}" if r.region
                                                                     else "")
                for r in report.remarks]
        assert sorted(said) == sorted(remarks.group(1).split()), f"{case}: remarks made"
        assert all(r.pass_ == pass_name for r in report.remarks)
    if pass_name in IDEMPOTENT:
        again, _ = p(after)
        assert again == after, f"{case}: a second run of {pass_name} changes the graph again"
