"""The HLO parser and the op mapping on small hand-written modules, the seeds' listings, and
bad input (which must raise ParseError with a line and a column)."""

from __future__ import annotations

import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference
from explorer.frontend import hlo_attrs as A
from explorer.frontend.hlo import parse_hlo
from explorer.ir import TensorType, TupleType
from tests.frontend.hlo.helpers import DATA, check_imported, opaque_opcodes


def module(entry: str, *others: str) -> str:
    return "HloModule m\n\n" + "\n\n".join([*others, f"ENTRY %main {{\n{entry}\n}}"]) + "\n"


ADD = "%add_f32 (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] " \
      "parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}"
MAX = ADD.replace("add_f32", "max_f32").replace("add(", "maximum(")


def test_seed_002_listings() -> None:
    """gemm2 of seed 002, before and after XLA's optimisation: the fusion is a kernel region
    (XLA did not turn broadcast-multiply-reduce into a dot), and both compute A @ B."""
    before = gx.from_hlo((DATA / "seed002_gemm2_before.hlo").read_text())
    after = gx.from_hlo((DATA / "seed002_gemm2_after.hlo").read_text())
    for g in (before, after):
        check_imported(g)
        assert not opaque_opcodes(g)
    assert after.ops() == {"parameter": 2, "kernel": 1}
    body = next(n for n in after.nodes if n.op == "kernel").attrs["body"]
    assert {"broadcast_in_dim", "mul", "reduce_sum"} <= set(body.ops())
    assert "dot_general" not in body.ops()
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((2, 2)).astype(np.float32) for _ in range(2))
    for g in (before, after):
        (out,) = reference.evaluate(g, [a, b])
        np.testing.assert_allclose(out, a @ b, rtol=1e-6)


def test_seed_001_bare_computation() -> None:
    """The slide's HLO has no module header and no '%' on names."""
    g = gx.from_hlo("Add (x: f32[100,100], y: f32[100,100]) -> f32[100,100] {\n"
                    "    x = f32[100,100] parameter(0)\n    y = f32[100,100] parameter(1)\n"
                    "    ROOT add = f32[100,100] add(x, y)\n}")
    check_imported(g)
    assert g.name == "Add" and g.ops() == {"parameter": 2, "add": 1}


def test_seed_003_convolution_stays_opaque_with_its_dimension_numbers() -> None:
    text = module(
        "  %transpose = f32[16,1,28,28]{3,2,1,0} parameter(0)\n"
        "  %transpose.1 = f32[6,1,5,5]{3,2,1,0} parameter(1)\n"
        "  ROOT %convolution = f32[16,24,24,6]{3,2,1,0} convolution(f32[16,1,28,28]{3,2,1,0} "
        "%transpose, f32[6,1,5,5]{3,2,1,0} %transpose.1), window={size=5x5}, "
        "dim_labels=bf01_oi01->b01f, metadata={op_type=\"Conv2D\" "
        "op_name=\"sequential/conv2d/Conv2D\"}")
    g = gx.from_hlo(text)
    check_imported(g)
    conv = g[g.outputs[0]]
    assert conv.op == "opaque" and conv.attrs["opcode"] == "convolution"
    assert conv.type == TensorType((16, 24, 24, 6), "f32")
    assert "dim_labels=bf01_oi01->b01f" in conv.attrs["text"]
    ins = parse_hlo(text).entry.root
    dims = A.conv_dims(text, ins.attrs["dim_labels"])
    assert (dims.input_batch, dims.input_feature, dims.input_spatial) == (0, 1, (2, 3))
    assert (dims.kernel_output_feature, dims.kernel_input_feature) == (0, 1)
    assert (dims.output_batch, dims.output_feature, dims.output_spatial) == (0, 3, (1, 2))
    assert A.window(text, ins.attrs["window"]) == {"size": (5, 5)}


def test_shapes_layouts_tuples() -> None:
    m = parse_hlo(module(
        "  %p = (f32[2,3]{0,1}, s32[], (pred[4])) parameter(0)\n"
        "  %d = f32[<=8,2]{1,0:T(8,128)} parameter(1)\n"
        "  ROOT %t = token[] after-all()"))
    p, d, t = m.entry.instructions
    assert p.shape.is_tuple and p.shape.elements[0].layout == (0, 1)
    assert str(p.shape) == "(f32[2,3], s32[], (pred[4]))"
    assert d.shape.dims == (8, 2) and d.shape.dynamic and d.shape.layout == (1, 0)
    assert t.shape.dtype == "token" and t.opcode == "after-all"


def test_attributes() -> None:
    text = module(
        "  %x = f32[6,8] parameter(0)\n"
        "  %s = f32[2,3] slice(%x), slice={[1:5:2], [0:8:3]}\n"
        "  %p = f32[] constant(0)\n"
        "  %pad = f32[4,7] pad(%s, %p), padding=1_1x2_2\n"
        "  %y = f32[8,6] transpose(%x), dimensions={1,0}\n"
        "  ROOT %d = f32[6,6] dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    g = gx.from_hlo(text)
    check_imported(g)
    by_op = {n.op: n for n in g.nodes}
    assert by_op["slice"].attrs == {"start_indices": (1, 0), "limit_indices": (5, 8),
                                    "strides": (2, 3)}
    assert by_op["pad"].attrs["padding_config"] == ((1, 1, 0), (2, 2, 0))
    assert by_op["transpose"].attrs["permutation"] == (1, 0)
    assert by_op["dot_general"].attrs["dimension_numbers"] == (((1,), (0,)), ((), ()))


def test_metadata_sources() -> None:
    old = module('  ROOT %x = f32[2] parameter(0), metadata={op_type="Neg" op_name="f/neg" '
                 'source_file="model.py" source_line=12}')
    (x,) = gx.from_hlo(old).nodes
    assert str(x.source) == "model.py:12" and x.source.function == "f/neg"
    new = ("HloModule m\n\nFileNames\n1 \"/home/u/nb.py\"\n\nFunctionNames\n1 \"f\"\n\n"
           "FileLocations\n1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=1 "
           "end_column=9}\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\n"
           "ENTRY %main {\n  ROOT %x = f32[2] parameter(0), metadata={op_name=\"x\" "
           "stack_frame_id=1}\n}\n")
    (x,) = gx.from_hlo(new).nodes
    assert str(x.source) == "/home/u/nb.py:7" and x.source.function == "f"


def test_select_compare_and_reductions() -> None:
    text = module(
        "  %x = f32[3,4] parameter(0)\n  %y = f32[3,4] parameter(1)\n"
        "  %lt = pred[3,4] compare(%x, %y), direction=LT\n"
        "  %sel = f32[3,4] select(%lt, %x, %y)\n"
        "  %zero = f32[] constant(0)\n  %two = f32[] constant(2.5)\n"
        "  %ninf = f32[] constant(-inf)\n"
        "  %sum = f32[3] reduce(%sel, %zero), dimensions={1}, to_apply=%add_f32\n"
        "  %sum2 = f32[3] reduce(%sel, %two), dimensions={1}, to_apply=%add_f32\n"
        "  %mx = f32[3] reduce(%sel, %ninf), dimensions={1}, to_apply=%max_f32\n"
        "  ROOT %t = (f32[3], f32[3], f32[3]) tuple(%sum, %sum2, %mx)", ADD, MAX)
    g = gx.from_hlo(text)
    check_imported(g)
    ops = g.ops()
    assert ops["reduce_sum"] == 2 and ops["reduce_max"] == 1 and ops["lt"] == 1
    assert ops["add"] == 1  # only the non-identity init is combined afterwards
    assert len(g.outputs) == 3 and "tuple" not in ops
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    sel = np.where(x < y, x, y)
    outs = reference.evaluate(g, [x, y])
    np.testing.assert_allclose(outs[0], sel.sum(1), rtol=1e-6)
    np.testing.assert_allclose(outs[1], sel.sum(1) + 2.5, rtol=1e-6)
    np.testing.assert_allclose(outs[2], sel.max(1))


@pytest.mark.parametrize("payload, dtype, shape, want", [
    ("0", "f32", (), 0.0), ("-inf", "f32", (), -np.inf), ("true", "pred", (), True),
    ("{1, 2, 3}", "s32", (3,), [1, 2, 3]), ("{ {1.5, 2}, {3, -4e-2} }", "f32", (2, 2),
                                           [[1.5, 2], [3, -0.04]]),
    ("9223372036854775807", "s64", (), 2**63 - 1), ("nan", "bf16", (), np.nan),
])
def test_constants(payload: str, dtype: str, shape: tuple[int, ...], want: object) -> None:
    typ = f"{dtype}[{','.join(map(str, shape))}]"
    g = gx.from_hlo(module(f"  ROOT %c = {typ} constant({payload})"))
    check_imported(g)
    (c,) = g.nodes
    assert c.op == "constant"
    got = c.attrs["value"].array
    assert got.shape == shape
    if dtype == "bf16":  # NumPy compares NaNs of its own float types only
        got = got.astype(np.float32)
    np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype))


def test_opaque_keeps_what_we_cannot_read() -> None:
    g = gx.from_hlo(module(
        "  %big = f32[100] constant({...})\n"
        "  %p = f32[10,10]{0,1} parameter(0)\n"
        "  %bc = f32[100]{0} bitcast(%p)\n"  # a transpose in disguise: not a reshape
        "  %cc = f32[100] custom-call(%bc), custom_call_target=\"foo\"\n"
        "  ROOT %a = f32[100] add(%cc, %big)"))
    check_imported(g)
    assert opaque_opcodes(g) == {"constant", "bitcast", "custom-call"}
    assert g[g.outputs[0]].op == "add"  # ops downstream of opaque ones still map
    cc = next(n for n in g.nodes if n.attrs.get("opcode") == "custom-call")
    assert cc.attrs["text"].startswith("%cc = f32[100] custom-call(") and cc.attrs["type"] == "f32[100]"


def test_tuple_parameters_are_flattened() -> None:
    g = gx.from_hlo(module(
        "  %p = (f32[2], s32[]) parameter(0)\n"
        "  %a = f32[2] get-tuple-element(%p), index=0\n"
        "  ROOT %n = f32[2] negate(%a)"))
    check_imported(g)
    assert [n.type for n in g.param_nodes] == [TensorType((2,), "f32"), TensorType((), "i32")]
    tup = next(n for n in g.nodes if n.op == "tuple")
    assert tup.type == TupleType((TensorType((2,), "f32"), TensorType((), "i32")))
    (out,) = reference.evaluate(g, [np.ones(2, np.float32), np.int32(3)])
    np.testing.assert_array_equal(out, [-1, -1])


@pytest.mark.parametrize("text, line, column", [
    ("HloModule m\n\nENTRY %main {\n  ROOT %x = f32[2] add(%y\n}\n", 5, 1),
    ("HloModule m\n\nENTRY %main {\n  ROOT %x = f32[2 parameter(0)\n}\n", 4, 19),
    ("HloModule m\n\nENTRY %main {\n  ROOT %x = f32[2] add(%y, %y)\n}\n", 4, 3),
    ("HloModule m\n\nENTRY %main {\n  %x = f32[2] parameter(1)\n}\n", 3, 1),
    ("HloModule m\n\nENTRY %main {\n  ROOT %x = f32[2] fusion(), calls=%nope\n}\n", 4, 36),
    ("HloModule m\n\nENTRY %main {\n  ROOT %x = f32[2] broadcast(), dimensions={a}\n}\n", 4, 44),
    ("HloModule m\n\nENTRY %main {\n  ROOT %x = f32[2] parameter(\u00b20)\n}\n", 4, 3),
    ("HloModule m\n", 2, 1),
    ("", 1, 1),
])
def test_errors_have_line_and_column(text: str, line: int, column: int) -> None:
    with pytest.raises(gx.ParseError) as e:
        gx.from_hlo(text)
    assert (e.value.line, e.value.column) == (line, column), str(e.value)


def test_not_text() -> None:
    with pytest.raises(gx.ParseError):
        gx.from_hlo(b"HloModule m")  # type: ignore[arg-type]


def test_out_of_order_instructions_and_cycles() -> None:
    g = gx.from_hlo(module("  ROOT %b = f32[2] negate(%a)\n  %a = f32[2] parameter(0)"))
    check_imported(g)
    assert [n.op for n in g.nodes] == ["parameter", "neg"]
    with pytest.raises(gx.ParseError, match="depends on itself"):
        gx.from_hlo(module("  %p = f32[2] parameter(0)\n  %a = f32[2] add(%p, %b)\n"
                           "  ROOT %b = f32[2] negate(%a)"))


def test_deep_nesting_is_refused_not_a_crash() -> None:
    deep_tuple = "(" * 500 + "f32[]" + ")" * 500
    with pytest.raises(gx.ParseError, match="nest deeper"):
        gx.from_hlo(module(f"  ROOT %p = {deep_tuple} parameter(0)"))
    n = 200
    comps = [f"%c{k} {{\n  %p{k} = f32[] parameter(0)\n  ROOT %r{k} = f32[] "
             + (f"call(%p{k}), to_apply=%c{k + 1}" if k + 1 < n else f"negate(%p{k})") + "\n}"
             for k in range(n)]
    with pytest.raises(gx.ParseError, match="nest deeper"):
        gx.from_hlo(module("  %x = f32[] parameter(0)\n  ROOT %y = f32[] call(%x), to_apply=%c0",
                           *comps))
    shallow = gx.from_hlo(module("  %x = f32[] parameter(0)\n  ROOT %y = f32[] call(%x), "
                                 f"to_apply=%c{n - 5}", *comps))
    check_imported(shallow)
    (out,) = reference.evaluate(shallow, [np.float32(2)])
    assert out == -2
