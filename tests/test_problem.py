"""Problem: layouts and alignment read from tensors, the stable key and its parser, dtypes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gemmtune.problem import Problem, dtype_name, operand_aligned, operand_layout


# ------------------------------------------------------------------ layouts
def test_from_tensors_row_major():
    a, b = torch.randn(32, 64, dtype=torch.float16), torch.randn(64, 48, dtype=torch.float16)
    p = Problem.from_tensors(a, b)
    assert (p.m, p.n, p.k) == (32, 48, 64)
    assert (p.layout_a, p.layout_b) == ("row", "row")
    assert p.aligned_a and p.aligned_b
    assert p.dtype == p.out_dtype == "float16"


def test_from_tensors_transposed_views_are_col():
    a = torch.randn(64, 32, dtype=torch.bfloat16).t()  # (32, 64), stride (1, 32)
    b = torch.randn(48, 64, dtype=torch.bfloat16).t()  # (64, 48), stride (1, 64)
    p = Problem.from_tensors(a, b)
    assert (p.m, p.n, p.k) == (32, 48, 64)
    assert (p.layout_a, p.layout_b) == ("col", "col")
    assert p.aligned_a and p.aligned_b


def test_from_tensors_strided_is_never_aligned():
    a = torch.randn(16, 128, dtype=torch.float32)[:, ::2]  # (16, 64), stride (128, 2)
    b = torch.randn(64, 16, dtype=torch.float32)
    p = Problem.from_tensors(a, b)
    assert p.layout_a == "strided" and not p.aligned_a
    assert p.layout_b == "row" and p.aligned_b


def test_size_one_dims_do_not_constrain_layout():
    # A (1, K) row vector is "row" whatever its stride on the unit dim says.
    assert operand_layout(1, 64, (1, 1)) == "row"
    assert operand_layout(1, 64, (999, 1)) == "row"
    assert operand_layout(64, 1, (1, 64)) == "row"
    assert operand_layout(64, 1, (7, 3)) == "row"
    assert operand_layout(3, 64, (1, 3)) == "col"
    assert operand_layout(3, 64, (128, 2)) == "strided"
    x = torch.randn(64, 1, dtype=torch.float16).t()  # (1, 64), stride (1, 1)
    assert Problem.from_tensors(x, torch.randn(64, 8, dtype=torch.float16)).layout_a == "row"


# ------------------------------------------------------------------ alignment
def test_offset_view_is_unaligned():
    buf = torch.randn(1 + 32 * 64, dtype=torch.float16)
    a = buf[1:1 + 32 * 64].view(32, 64)  # pointer 2 bytes past an aligned one
    b = torch.randn(64, 16, dtype=torch.float16)
    p = Problem.from_tensors(a, b)
    assert a.data_ptr() % 16 == 2
    assert p.layout_a == "row" and not p.aligned_a and p.aligned_b
    # Offset by 8 fp16 elements = 16 bytes: aligned again.
    a8 = buf[8:8 + 16 * 64].view(16, 64)
    assert Problem.from_tensors(a8, b).aligned_a


def test_odd_leading_stride_is_unaligned():
    a = torch.randn(32, 65, dtype=torch.float16)[:, :64]  # leading stride 65 * 2 B = 130 B
    p = Problem.from_tensors(a, torch.randn(64, 8, dtype=torch.float16))
    assert a.data_ptr() % 16 == 0 and p.layout_a == "row" and not p.aligned_a
    # Odd K itself: contiguous but the row pitch is 2*K bytes.
    p2 = Problem.from_tensors(torch.randn(4, 17, dtype=torch.float16),
                              torch.randn(17, 8, dtype=torch.float16))
    assert not p2.aligned_a and p2.aligned_b
    # Column-major: the leading stride is the one of the second dim.
    at = torch.randn(17, 4, dtype=torch.float16).t()   # (4, 17), stride (1, 4): 8 B pitch
    assert not Problem.from_tensors(at, torch.randn(17, 8, dtype=torch.float16)).aligned_a


def test_operand_aligned_arithmetic():
    assert operand_aligned(0, 4, 8, (8, 1), 2)        # 16 B pitch
    assert not operand_aligned(0, 4, 4, (4, 1), 2)    # 8 B pitch
    assert not operand_aligned(8, 4, 8, (8, 1), 2)    # pointer off by 8 B
    assert operand_aligned(0, 1, 3, (3, 1), 2)        # one row: its pitch is never used
    assert not operand_aligned(0, 4, 8, (16, 2), 2)   # strided: never aligned


def test_from_sizes_alignment_defaults():
    assert Problem.from_sizes(8, 8, 64, "fp16").aligned_a
    assert not Problem.from_sizes(8, 8, 63, "fp16").aligned_a          # 126 B rows
    assert not Problem.from_sizes(8, 63, 64, "fp16").aligned_b
    assert Problem.from_sizes(8, 63, 64, "fp16", layout_b="col").aligned_b  # pitch is K
    assert not Problem.from_sizes(8, 8, 64, "fp16", layout_a="strided").aligned_a
    assert Problem.from_sizes(8, 8, 4, "fp32").aligned_a               # 16 B rows


# ------------------------------------------------------------------ keys
def test_key_exact_string():
    p = Problem.from_sizes(32, 32, 28672, "bfloat16")
    assert p.key == "mm:M32-N32-K28672:bf16->bf16:row.a/row.a"
    a = torch.randn(333 * 1025 + 1, dtype=torch.float16)[1:].view(333, 1025)
    b = torch.randn(4097, 1025, dtype=torch.float16).t()
    assert Problem.from_tensors(a, b, torch.float32).key == \
        "mm:M333-N4097-K1025:fp16->fp32:row.u/col.u"
    p32 = Problem.from_sizes(64, 64, 64, "fp32", allow_tf32=True, layout_b="col")
    assert p32.key == "mm:M64-N64-K64:fp32+tf32->fp32:row.a/col.a"
    assert str(p32) == p32.key


def test_key_is_stable_across_equal_problems():
    p1 = Problem.from_tensors(torch.randn(8, 16, dtype=torch.float16),
                              torch.randn(16, 24, dtype=torch.float16))
    p2 = Problem.from_sizes(8, 24, 16, torch.float16)
    assert p1 == p2 and p1.key == p2.key and hash(p1) == hash(p2)


@st.composite
def problems(draw) -> Problem:
    dtype = draw(st.sampled_from(["float16", "bfloat16", "float32"]))
    dims = st.integers(0, 2**20)
    return Problem(
        draw(dims), draw(dims), draw(dims), dtype,
        draw(st.sampled_from([dtype, "float32"])),
        draw(st.sampled_from(["row", "col", "strided"])),
        draw(st.sampled_from(["row", "col", "strided"])),
        draw(st.booleans()), draw(st.booleans()), draw(st.booleans()),
    )


@settings(max_examples=300, deadline=None)
@given(problems())
def test_key_round_trip(p):
    back = Problem.from_key(p.key)
    assert back == p
    assert back.key == p.key


@given(problems(), problems())
@settings(deadline=None)
def test_distinct_problems_distinct_keys(p, q):
    assert (p == q) == (p.key == q.key)


@pytest.mark.parametrize("key", [
    "", "mm", "mm:M1-N2-K3", "mm:M1-N2-K3:bf16->bf16", "mm:M1-N2:bf16->bf16:row.a/row.a",
    "mm:N1-M2-K3:bf16->bf16:row.a/row.a", "mm:Mx-N2-K3:bf16->bf16:row.a/row.a",
    "mm:M-1-N2-K3:bf16->bf16:row.a/row.a", "mm:M1-N2-K3:int8->int8:row.a/row.a",
    "mm:M1-N2-K3:bf16->fp16:row.a/row.a", "mm:M1-N2-K3:bf16:row.a/row.a",
    "mm:M1-N2-K3:bf16->bf16:diag.a/row.a", "mm:M1-N2-K3:bf16->bf16:row.x/row.a",
    "mm:M1-N2-K3:bf16->bf16:row.au/row.a", "mm:M1-N2-K3:bf16->bf16:row/row.a",
    "mm:M1-N2-K3:bf16->bf16:row.a", "bmm:M1-N2-K3:bf16->bf16:row.a/row.a",
    "mm:M1-N2-K3:bf16->bf16:row.a/row.a:extra",
])
def test_malformed_keys(key):
    with pytest.raises(ValueError, match="malformed problem key"):
        Problem.from_key(key)


# ------------------------------------------------------------------ dtypes
@pytest.mark.parametrize("alias,name", [
    ("fp16", "float16"), ("half", "float16"), ("f16", "float16"), ("float16", "float16"),
    ("torch.float16", "float16"), ("FP16", "float16"), (torch.float16, "float16"),
    ("bf16", "bfloat16"), ("bfloat16", "bfloat16"), (torch.bfloat16, "bfloat16"),
    ("fp32", "float32"), ("float", "float32"), ("f32", "float32"), (torch.float32, "float32"),
])
def test_dtype_aliases(alias, name):
    assert dtype_name(alias) == name
    assert Problem.from_sizes(4, 4, 4, alias).dtype == name


# float8_e4m3fn / e5m2 are scaled_mm's (tests/test_scaled_mm.py); AMD's fnuz variants are not ours.
@pytest.mark.parametrize("bad", ["int8", "fp64", "double", torch.float64, torch.int32, torch.float8_e4m3fnuz])
def test_unsupported_dtypes(bad):
    with pytest.raises(TypeError, match="unsupported dtype"):
        dtype_name(bad)


def test_dtype_wrong_type():
    with pytest.raises(TypeError, match="must be a torch.dtype or a string"):
        dtype_name(16)  # type: ignore[arg-type]


def test_tf32_normalised_for_16_bit():
    p = Problem.from_sizes(4, 4, 4, "bf16", allow_tf32=True)
    assert not p.allow_tf32 and "+tf32" not in p.key
    assert Problem.from_sizes(4, 4, 4, "fp32", allow_tf32=True).allow_tf32


def test_out_dtype_rules():
    assert Problem.from_sizes(4, 4, 4, "bf16", "fp32").out_dtype == "float32"
    with pytest.raises(TypeError, match="out_dtype float16 is not supported for bfloat16"):
        Problem.from_sizes(4, 4, 4, "bf16", "fp16")
    with pytest.raises(TypeError, match="out_dtype"):
        Problem.from_sizes(4, 4, 4, "fp32", "bf16")


@pytest.mark.parametrize("field,value", [("m", -1), ("n", 1.5), ("k", True), ("layout_a", "diag"),
                                         ("op", "baddbmm"), ("batch", 0)])
def test_invalid_fields(field, value):
    kw = dict(m=4, n=4, k=4)
    kw[field] = value
    with pytest.raises(ValueError, match=field):
        Problem(**kw)


def test_derived_quantities():
    p = Problem.from_sizes(32, 64, 128, "bf16", "fp32")
    assert p.flops == 2 * 32 * 64 * 128
    assert p.min_bytes == 2 * (32 * 128 + 128 * 64) + 4 * 32 * 64
    assert (p.read_bytes, p.write_bytes) == (2 * (32 * 128 + 128 * 64), 4 * 32 * 64)
    assert p.torch_dtype == torch.bfloat16 and p.torch_out_dtype == torch.float32
    assert p.with_sizes(m=1).m == 1 and p.with_sizes(m=1).k == 128
    assert p.log2_shape() == (5.0, 6.0, 7.0)
    assert Problem.from_sizes(0, 1, 2, "fp16").log2_shape() == (0.0, 0.0, 1.0)


def test_out_dtype_error_for_fp32_inputs_names_one_choice():
    # it read "use float32 or float32"
    with pytest.raises(TypeError, match=r"not supported for float32 inputs; use float32$"):
        Problem.from_sizes(4, 4, 4, "float32", out_dtype="float16")


def test_min_bytes_splits_into_read_and_write_bytes():
    """C is the only write; the bias (an output-sized row) and scaled_mm's scales are reads."""
    cases = [
        (Problem.from_sizes(8, 24, 16, "fp16", op="addmm"), 2 * (8 * 16 + 16 * 24) + 2 * 24, 2 * 8 * 24),
        (Problem.from_sizes(128, 64, 32, "fp16", layout_b="col", op="bmm", batch=4),
         2 * 4 * (128 * 32 + 32 * 64), 2 * 4 * 128 * 64),
        (Problem.from_sizes(16, 64, 32, "e4m3", "bf16", layout_b="col", op="scaled_mm", scale="row"),
         16 * 32 + 32 * 64 + 4 * (16 + 64), 2 * 16 * 64),
    ]
    for p, read, write in cases:
        assert (p.read_bytes, p.write_bytes) == (read, write), p.key
        assert p.min_bytes == read + write
