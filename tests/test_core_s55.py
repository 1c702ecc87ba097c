"""Session 55's hunt of the pure core (verify.compare, shapes' suite and size parsing): each test
failed before its fix."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gemmtune.problem import Problem
from gemmtune.shapes import _size, load_csv, parse_shape
from gemmtune.verify import check, compare

HEADER = "group,name,M,N,K,dtype"


def _suite(tmp_path, text: str):
    p = tmp_path / "suite.csv"
    p.write_text(text)
    return p


# ----------------------------------------------------------------------------- verify.compare
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_compare_fails_a_non_finite_reference(bad):
    # Every error measured against a NaN/inf reference is NaN, and NaN > tol is False: a finite
    # output passed, though the right output holds the NaN (which compare fails).
    ref = torch.tensor([[1.0, bad], [2.0, 3.0]], dtype=torch.float64)
    res = compare(torch.tensor([[1.0, 5.0], [2.0, 3.0]]), ref, 1e-2)
    assert not res.ok
    assert "reference" in res.reason and "NaN or inf" in res.reason


def test_check_fails_when_inputs_hold_nan_and_output_is_finite():
    # The kernel that skips A's NaN column (here: an output computed without it) was passed.
    a = torch.ones(4, 8)
    a[0, 3] = math.nan
    b = torch.ones(8, 4)
    p = Problem.from_sizes(4, 4, 8, "fp32")
    assert not check(torch.full((4, 4), 8.0), a, b, p).ok


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=4, max_size=4), st.integers(0, 3),
       st.sampled_from([math.nan, math.inf, -math.inf]))
def test_compare_never_passes_against_a_non_finite_reference(vals, at, bad):
    out = torch.tensor(vals, dtype=torch.float32)
    ref = out.double().clone()
    ref[at] = bad
    assert not compare(out, ref, 1e-2).ok


def test_compare_zero_reference_needs_a_zero_output():
    # With ref all zero the error was taken as absolute: 4e-3 everywhere passed a bf16 tolerance.
    ref = torch.zeros(2, 2, dtype=torch.float64)
    res = compare(torch.full((2, 2), 4e-3, dtype=torch.bfloat16), ref, 1e-2)
    assert not res.ok and "all zero" in res.reason
    assert compare(torch.zeros(2, 2, dtype=torch.bfloat16), ref, 1e-2).ok
    assert compare(torch.tensor([[-0.0, 0.0]]), torch.zeros(1, 2, dtype=torch.float64), 1e-4).ok


# ----------------------------------------------------------------------------- shapes
def test_scaled_mm_row_refuses_a_batch(tmp_path):
    # The batch column was read for every op but scaled_mm, whose rows tuned one product silently.
    path = _suite(tmp_path, f"{HEADER},op,batch\ng,a,16,32,64,e4m3,scaled_mm,8\n")
    with pytest.raises(ValueError, match=r"suite.csv:2: .*batch 8 is bmm's"):
        load_csv(path)
    ok = _suite(tmp_path, f"{HEADER},op,batch\ng,a,16,32,64,e4m3,scaled_mm,1\n")
    assert load_csv(ok)[0].problem.op == "scaled_mm"


def test_blank_lines_of_spaces_are_skipped_anywhere(tmp_path):
    # An empty line between rows was skipped (csv does), one of spaces was "missing field(s) name, ...".
    path = _suite(tmp_path, f"{HEADER}\ng,a,8,8,8,bf16\n   \ng,b,16,8,8,bf16\n\t\n")
    assert [s.name for s in load_csv(path)] == ["a", "b"]
    # and a later error still names its own line of the file
    bad = _suite(tmp_path, f"{HEADER}\n  \ng,a,8,8,8,bf16\n \ng,b,0,8,8,bf16\n")
    with pytest.raises(ValueError, match=r"suite.csv:5: "):
        load_csv(bad)


def test_sizes_are_ascii_digits(tmp_path):
    # int() took Python's digit separator and other scripts' digits: '6_4' read as 64.
    for text in ("6_4", "1_024", "\u0666\u0664", "\uff16\uff14"):
        with pytest.raises(ValueError, match="M must be a whole number"):
            _size(text, "M")
        with pytest.raises(ValueError, match=r"suite.csv:2: .*M must be a whole number"):
            load_csv(_suite(tmp_path, f"{HEADER}\ng,a,{text},8,8,bf16\n"))
    # what a spreadsheet or pandas writes still reads
    assert (_size("64", "M"), _size(" 4.0 ", "batch"), _size("+8", "K"), _size("64.", "N")) == (64, 4, 8, 64)


def test_shape_strings_are_ascii_digits():
    for text in ("\uff13\uff12x8x8", "8x\u0668x8:bf16"):
        with pytest.raises(ValueError, match="bad shape"):
            parse_shape(text)
        with pytest.raises(ValueError, match="bad bmm shape"):
            parse_shape("2x" + text, op="bmm")
    assert parse_shape(" 32 x 32 x 28672 : bf16 ").problem.key == "mm:M32-N32-K28672:bf16->bf16:row.a/row.a"
