"""Small passes for the view tests: one that rewrites, one that fuses into a kernel region,
one that changes nothing. The real passes live in explorer/passes/; these keep the view's
tests independent of them."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.ir.builder import GraphBuilder
from explorer.ir.graph import Attrs, Graph, Node
from explorer.passes.base import PassReport, Rewrite


@dataclass(frozen=True)
class MulByTwoToAdd:
    """x * 2 -> x + x."""

    name: str = "mul-two-to-add"

    def __call__(self, g: Graph) -> tuple[Graph, PassReport]:
        nodes, rewrites = [], []
        for n in g.nodes:
            if n.op == "mul" and _is_two(g, n.inputs[1]):
                x = n.inputs[0]
                nodes.append(Node(n.id, "add", (x, x), Attrs(), n.type, n.source))
                rewrites.append(Rewrite("mul-by-two", (n.id,), (n.id,), str(n.source)))
            else:
                nodes.append(n)
        out = Graph(nodes, g.params, g.outputs, g.name)
        return out, PassReport(changed=bool(rewrites), rewrites=tuple(rewrites))


def _is_two(g: Graph, i: int) -> bool:
    n = g[i]
    return n.op == "constant" and n.attrs["value"].array.size == 1 \
        and float(n.attrs["value"].array.reshape(())) == 2.0


@dataclass(frozen=True)
class DropUnused:
    """Removes nodes nobody reads (a tiny dead-code pass)."""

    name: str = "drop-unused"

    def __call__(self, g: Graph) -> tuple[Graph, PassReport]:
        live = set(g.outputs) | set(g.params)
        for n in reversed(g.nodes):
            if n.id in live:
                live.update(n.inputs)
        nodes = [n for n in g.nodes if n.id in live]
        gone = tuple(n.id for n in g.nodes if n.id not in live)
        report = PassReport(changed=bool(gone),
                            rewrites=tuple(Rewrite("dead", (i,), (), None) for i in gone))
        return Graph(nodes, g.params, g.outputs, g.name), report


@dataclass(frozen=True)
class Nothing:
    name: str = "nothing"

    def __call__(self, g: Graph) -> tuple[Graph, PassReport]:
        return g, PassReport(changed=False)


@dataclass(frozen=True)
class FuseElementwise:
    """Wraps the first run of two or more consecutive add/mul nodes into a `kernel` region."""

    name: str = "fuse-elementwise"

    def __call__(self, g: Graph) -> tuple[Graph, PassReport]:
        run = _first_run(g)
        if len(run) < 2:
            return g, PassReport(changed=False)
        inside = {n.id for n in run}
        outer_inputs = []
        for n in run:
            outer_inputs += [i for i in n.inputs if i not in inside and i not in outer_inputs]
        body = GraphBuilder(name="fused")
        env = {i: body.param(g[i].type, f"p{k}") for k, i in enumerate(outer_inputs)}
        for n in run:
            env[n.id] = body.add(n.op, [env[i] for i in n.inputs], n.attrs, n.source)
        last = run[-1]
        kernel_body = body.build([env[last.id]])
        kid = g.next_id
        kernel = Node(kid, "kernel", tuple(outer_inputs),
                      Attrs({"body": kernel_body, "kind": "loop"}), last.type, last.source)
        nodes = []
        for n in g.nodes:
            if n.id in inside:
                if n.id == last.id:
                    nodes.append(kernel)
                continue
            nodes.append(Node(n.id, n.op, tuple(kid if i == last.id else i for i in n.inputs),
                              n.attrs, n.type, n.source))
        outputs = tuple(kid if o == last.id else o for o in g.outputs)
        rw = Rewrite("fuse", tuple(n.id for n in run), (kid,), str(last.source))
        return Graph(nodes, g.params, outputs, g.name), PassReport(True, (rw,))


def _first_run(g: Graph) -> list[Node]:
    best: list[Node] = []
    for n in g.nodes:
        if n.op in ("add", "mul") and (not best or best[-1].id in n.inputs):
            best.append(n)
        elif len(best) >= 2:
            break
        else:
            best = [n] if n.op in ("add", "mul") else []
    return best


def all_toy_passes() -> list:
    return [MulByTwoToAdd(), Nothing(), FuseElementwise(), DropUnused()]
