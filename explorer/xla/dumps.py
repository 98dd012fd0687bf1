"""XLA's dump folder: which file is which stage of its pipeline.

With `xla_dump_hlo_pass_re=".*"` XLA writes, for one module,

    module_0008.jit_f.before_optimizations.txt
    module_0008.jit_f.0007.simplification.after_algsimp.before_simplify-sorts.txt
    module_0008.jit_f.0017.copy-insertion.after_adding_copies_to_resolve_interference.txt
    module_0008.jit_f.cpu_after_optimizations.txt

numbered in the order the passes ran, plus buffer assignments, LLVM IR and object files that
are not HLO. A numbered file is written at the start of each pass pipeline and after each pass
that reported a change.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_BEFORE = "before_optimizations.txt"
_PASS = re.compile(r"(?P<seq>\d+)\.(?P<pipeline>.+?)\.after_(?P<pass>.+?)(?:\.before_(?P<next>.+))?"
                   r"\.txt")
_FINAL = re.compile(r"(?P<backend>\w+?)_after_optimizations\.txt")


@dataclass(frozen=True)
class DumpFile:
    file: str  # the file's name
    text: str
    pipeline: str  # XLA's pipeline, "" for the first and the final module
    pass_name: str  # the pass after which XLA wrote it ("pipeline-start" at a pipeline's start)
    seq: int  # XLA's number; -1 for the module before optimisation, 10**9 for the final one

    @property
    def stage_name(self) -> str:
        """'<pipeline>.<pass>' in kebab-case, as our stage names are (XLA's pass names
        already are; its pipeline names mix case and underscores)."""
        return f"{_kebab(self.pipeline)}.{_kebab(self.pass_name)}"


def read_dump(folder: str) -> list[DumpFile]:
    """The HLO files of the (last) module in `folder`, in XLA's order."""
    names = sorted(os.listdir(folder))
    firsts = [n for n in names if n.startswith("module_") and n.endswith("." + _BEFORE)]
    if not firsts:
        raise FileNotFoundError(f"XLA wrote no module before optimisation into {folder}")
    prefix = firsts[-1][: -len(_BEFORE)]
    out = []
    for name in names:
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix):]
        if rest == _BEFORE:
            entry = ("", "before-optimizations", -1)
        elif m := _FINAL.fullmatch(rest):
            entry = ("", f"{m.group('backend')}-after-optimizations", 10**9)
        elif m := _PASS.fullmatch(rest):
            entry = (m.group("pipeline"), m.group("pass"), int(m.group("seq")))
        else:
            continue  # buffer assignment, LLVM IR, object code, debug options
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            out.append(DumpFile(name, f.read(), *entry))
    return sorted(out, key=lambda d: d.seq)


def module_body(text: str) -> str:
    """The text without its `HloModule` header line, whose flags (is_scheduled=true, ...)
    change without the module changing."""
    return text.split("\n", 1)[1] if text.startswith("HloModule") else text


def _kebab(name: str) -> str:
    return re.sub(r"[^a-z0-9.#-]+", "-", name.lower()).strip("-")
