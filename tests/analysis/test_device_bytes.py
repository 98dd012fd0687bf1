"""The planner's per-device figures of a sharded stage (analysis/device_bytes.py and
analysis/memory.py's per_device_peak): what one device holds of each value, on programs
written in the IR (planning needs no devices)."""

from __future__ import annotations

from explorer.analysis.device_bytes import device_bytes, devices
from explorer.analysis.memory import DEVICE_ALIGNMENT, plan
from explorer.ir.parser import parse

MESH = 'mesh<"x"=4>'
ROWS = f'sharding<{MESH}, P("x")>'


def _graph(body: str) -> str:
    return "graph @f {\n" + body + "\n}"


def test_an_unsharded_stage_has_no_per_device_figures() -> None:
    g = parse(_graph('  %0 = f32[64,16] parameter() {index=0, name="x"}\n'
                     '  %1 = f32[64,16] exp(%0)\n  %2 = f32[64,16] sin(%1)\n  return %2'))
    assert device_bytes(g) is None and devices(g) is None
    p = plan(g)
    assert p.per_device_peak is None and p.devices is None
    assert p.device_peak == p.peak_bytes == 64 * 16 * 4


def test_a_dot_keeps_its_operands_free_splits_and_a_split_contraction_is_whole() -> None:
    g = parse(_graph(
        f'  %0 = f32[64,16] parameter() {{index=0, name="x", sharding={ROWS}}}\n'
        '  %1 = f32[16,16] parameter() {index=1, name="w"}\n'
        '  %2 = f32[64,16] dot_general(%0, %1) {dimension_numbers=(((1,), (0,)), ((), ()))}\n'
        '  %3 = f32[16,64] transpose(%2) {permutation=(1, 0)}\n'
        '  %4 = f32[16] reduce_sum(%3) {axes=(1,)}\n'   # sums the split rows: whole
        '  %5 = f32[64] reduce_sum(%2) {axes=(1,)}\n'   # keeps them
        '  %6 = f32[16,16] dot_general(%3, %0) {dimension_numbers=(((1,), (0,)), ((), ()))}\n'
        '  return %4, %5, %6'))
    sized = device_bytes(g)
    assert sized is not None
    assert sized.sizes[2] == 64 * 16 * 4 // 4 and sized.sizes[3] == 64 * 16 * 4 // 4
    assert sized.sizes[5] == 64 * 4 // 4
    assert 4 not in sized.sizes and 6 not in sized.sizes  # a split contraction: partial sums


def test_elementwise_ops_keep_a_parameters_sharding_and_what_has_none_is_whole() -> None:
    g = parse(_graph(
        f'  %0 = f32[64,16] parameter() {{index=0, name="x", sharding={ROWS}}}\n'
        '  %1 = f32[64,16] parameter() {index=1, name="w"}\n'
        '  %2 = f32[64,16] exp(%0)\n'          # row-split, as x: 1/4 per device
        '  %3 = f32[16,16] dot_general(%2, %1) {dimension_numbers=(((0,), (0,)), ((), ()))}\n'
        '  %4 = f32[16,16] sin(%3)\n'          # the dot sums the split rows: whole, as is sin
        '  return %4'))
    sized = device_bytes(g)
    assert sized is not None and sized.devices == 4
    assert sized.sizes[2] == 64 * 16 * 4 // 4
    assert 3 not in sized.sizes and 4 not in sized.sizes
    p = plan(g)
    assert p.devices == 4
    # at the dot: exp's quarter and the dot's whole result; the global plan holds both whole
    assert p.per_device_peak == 64 * 16 * 4 // 4 + 16 * 16 * 4
    assert p.peak_bytes == 64 * 16 * 4 + 16 * 16 * 4


def test_a_constraint_lays_out_its_operand() -> None:
    g = parse(_graph(
        '  %0 = f32[64,16] parameter() {index=0, name="x"}\n'
        '  %1 = f32[64,16] exp(%0)\n'
        f'  %2 = f32[64,16] sharding_constraint(%1) {{sharding={ROWS}}}\n'
        '  %3 = f32[64,16] sin(%2)\n'
        '  %4 = f32[64,16] cos(%3)\n'
        '  return %4'))
    sized = device_bytes(g)
    assert sized is not None
    assert sized.sizes[1] == sized.sizes[2] == sized.sizes[3] == 64 * 16
    p = plan(g)
    # every temporary (and the reference's copy of the strided view sin reads) a quarter
    assert p.per_device_peak * 4 == p.peak_bytes >= 2 * 64 * 16 * 4


SHARD_MAP = _graph(f'''  %0 = f32[8,64] parameter() {{index=0, name="a"}}
  %1 = f32[8,64] shard_map(%0) {{mesh={MESH}, in_specs=(P("x"),), out_specs=(P("x"),),
    body=graph @shard_map_body {{
    %0 = f32[2,64] parameter() {{index=0, name="arg0"}}
    %1 = f32[2,64] exp(%0)
    %2 = f32[2,64] psum(%1) {{axes=("x",)}}
    %3 = f32[2,64] sin(%2)
    return %3
  }}}}
  %2 = f32[8,64] cos(%1)
  return %2''')


def test_a_shard_map_body_is_planned_per_device() -> None:
    """Its temporaries are per-device blocks: one device holds one body's peak; all devices
    together (what reference and cpu run on one host) hold one per device."""
    g = parse(SHARD_MAP)
    block = 2 * 64 * 4
    p = plan(g)
    assert p.devices == 4
    # at the shard_map: its per-device result block and the body's peak, at the psum: exp's
    # block, psum's, and (on a device, as XLA runs it) psum's send buffer
    assert p.per_device_peak == block + 3 * block
    # all devices on one host: the result whole, and every device's exp and psum blocks
    assert p.peak_bytes == 8 * 64 * 4 + 4 * 2 * block


def test_per_device_buffers_round_up_to_the_alignment() -> None:
    g = parse(SHARD_MAP.replace("f32[8,64]", "f32[8,4]").replace("f32[2,64]", "f32[2,4]"))
    assert plan(g).per_device_peak == 4 * DEVICE_ALIGNMENT  # four 32-byte blocks
