"""The front end's types, generated from the payload schema (explorer/view/schema.py):
`python -m explorer.view.schema_typescript` writes extension/src/schema.gen.ts. Every public
TypedDict and capitalised alias of the schema becomes a TypeScript declaration of the same name,
in the same order, with the class's docstring or the comment above the alias as its doc comment.
"""

import json
from itertools import takewhile
from pathlib import Path
from typing import Any

from typing_extensions import is_typeddict

from . import schema
from .schema import declarations, fields, typescript_type

TS_FILE = Path(__file__).resolve().parents[2] / "extension" / "src" / "schema.gen.ts"


def _doc(text: str | None, indent: str = "") -> list[str]:
    if not text:
        return []
    lines = [line.strip() for line in text.strip().replace("*/", "* /").splitlines()]
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {line}".rstrip() for line in lines), f"{indent} */"]


def _alias_doc(name: str) -> str:
    """The comment lines just above `name = ...` in this module."""
    lines = Path(schema.__file__).read_text(encoding="utf-8").splitlines()
    above = lines[:lines.index(next(x for x in lines if x.startswith(f"{name} = ")))]
    notes = list(takewhile(lambda x: x.startswith("# "), reversed(above)))
    return "\n".join(x[2:] for x in reversed(notes))


def _interface(name: str, tp: Any, names: dict[str, Any]) -> list[str]:
    bases = [b for b in getattr(tp, "__orig_bases__", ()) if is_typeddict(b)]
    inherited = {k for b in bases for k in fields(b)}
    own = {k: v for k, v in fields(tp).items() if k not in inherited}
    head = f"export interface {name}" + (f" extends {', '.join(b.__name__ for b in bases)}"
                                         if bases else "")
    if not own:
        return [head + " {}"]
    body = [f"  {k}{'' if k in tp.__required_keys__ else '?'}: {typescript_type(v, names)};"
            for k, v in own.items()]
    return [head + " {", *body, "}"]


def _wrapped(items: list[str], width: int = 100) -> list[str]:
    lines = [""]
    for item in items:
        if lines[-1] and len(lines[-1]) + len(item) + 2 > width:
            lines.append("")
        lines[-1] += ("" if not lines[-1] else " ") + item + ","
    return ["  " + line for line in lines]


def typescript() -> str:
    """The text of extension/src/schema.gen.ts."""
    decls = declarations()
    out = ["// Generated from explorer/view/schema.py by `python -m explorer.view.schema_typescript`:"
           " do not edit.", *(f"// {line}".rstrip() for line in
                              ["", *(schema.__doc__ or "").strip().splitlines()[:2]]), ""]
    for name, tp in decls.items():
        if is_typeddict(tp):
            out += [*_doc(tp.__doc__), *_interface(name, tp, decls), ""]
        else:
            others = {k: v for k, v in decls.items() if k != name}
            out += [*_doc(_alias_doc(name)), f"export type {name} = {typescript_type(tp, others)};", ""]
    out += ["/** The name of every trait, for listening to all of them. */",
            "export const TRAIT_NAMES: (keyof Traits)[] = [",
            *_wrapped([json.dumps(k) for k in fields(schema.Traits)]), "];", ""]
    return "\n".join(out)


if __name__ == "__main__":
    TS_FILE.write_text(typescript(), encoding="utf-8")
    print(f"wrote {TS_FILE}")
