"""Capture's gaps of session h3: matrix-vector products (``torch.mv``, ``A @ v``, ``matmul`` of a
3-D tensor and a vector, of a vector and a matrix) and the out= / in-place variants of the GEMM
ops (``mm.out``, ``addmm.out``, ``addmm_``, ``bmm.out``, ``baddbmm``'s and ``addbmm``'s). Each test
runs a small model on fresh random inputs, checks the recorded problem (M, N, K, dtype, layouts,
count) and that the model's output under capture is the output without it.

At the dispatch level (torch 2.13): ``torch.mv``, ``Tensor.mv`` and ``A @ v`` are ``aten.mv``;
``matmul(3-D, 1-D)`` views the 3-D operand as 2-D and runs ``aten.mv`` too; ``matmul(1-D, 2-D)``
unsqueezes the vector and runs ``aten.mm`` (captured before: tested here as the same problem as an
mv's). ``out=`` calls are the ``.out`` overloads (``torch.matmul(a, b, out=c)`` is ``mm.out``), and
``Tensor.addmm_`` is ``aten.addmm_``: none of them passes through the ``.default`` overload capture
listened to."""

from __future__ import annotations

import torch

import gemmtune
from gemmtune.capture import Capture
from gemmtune.problem import Problem
from gemmtune.shapes import load_csv


class Fn(torch.nn.Module):
    """A model whose forward is ``fn(*inputs)``: the op under test, called by a module."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def run_both(fn, *args) -> tuple[Capture, torch.Tensor]:
    """(the capture of ``fn(*args)``, its output under capture), after checking that output is
    exactly the one ``fn(*args)`` gives without capture."""
    model = Fn(fn)
    with torch.no_grad():
        want = model(*args)
    got = []
    cap = Capture().run(model, fn=lambda: got.append(model(*args)))
    assert torch.equal(got[0], want)
    return cap, got[0]


def only(cap: Capture):
    (rec,) = cap.records
    return rec, (rec.op, rec.m, rec.n, rec.k, rec.dtype, rec.layout_a, rec.layout_b, rec.batch, rec.count)


# ------------------------------------------------------------------ matrix-vector products
def test_mv_is_recorded_as_the_one_row_mm_of_its_transpose():
    """``A @ v`` (A: M x K) is the GEMM v^T A^T: M = 1, N = A's rows, K, B = A^T (a row-major A is a
    column-major B). That is the decode-shaped product the skinny family's GEMV path serves (M = 1, a
    K-contiguous B) and the one ``gemmtune.matmul(v[None], A.T)`` runs; the M x 1 x K form has
    N = 1, which no tiled family's tile fills and skinny refuses (M over its maximum)."""
    a, v = torch.randn(40, 24), torch.randn(24)
    cap, out = run_both(torch.mv, a, v)
    rec, got = only(cap)
    assert got == ("mm", 1, 40, 24, "float32", "row", "col", 1, 1)
    assert out.shape == (40,) and rec.tunable
    # the same problem as a Linear's decode step on the same weight: x (1, K) @ W.T
    assert rec.problem().key == Problem.from_tensors(torch.randn(1, 24), a.t()).key


def test_tensor_mv_and_matmul_operator_on_a_column_major_matrix():
    """``A.mv(v)`` and ``A @ v`` are aten.mv as well; a column-major A (``W.t()``) is a row-major B,
    and two calls of one problem are one record of count 2."""
    w, v = torch.randn(24, 40), torch.randn(24)   # A = w.t(): 40 x 24, column-major
    cap, _ = run_both(lambda a, x: a.mv(x) + (a @ x), w.t(), v)
    _, got = only(cap)
    assert got == ("mm", 1, 40, 24, "float32", "row", "row", 1, 2)


def test_a_strided_vector_is_a_column_major_one_row_operand():
    """A vector with a stride (a column of a matrix) is a 1 x K operand whose K dim is not
    contiguous: 'col', as operand_layout names a one-row matrix with a stride."""
    a, x = torch.randn(40, 24), torch.randn(24, 3)
    cap, _ = run_both(lambda m, vs: torch.mv(m, vs[:, 1]), a, x)
    _, got = only(cap)
    assert got == ("mm", 1, 40, 24, "float32", "col", "col", 1, 1)


def test_matmul_of_a_3d_tensor_and_a_vector_is_the_mv_of_its_rows():
    """``matmul(T, v)``, T: (B, M, K), views T as (B*M, K) and runs aten.mv: recorded as the
    1 x (B*M) x K mm, in the inputs' dtype."""
    t, v = torch.randn(3, 5, 16, dtype=torch.bfloat16), torch.randn(16, dtype=torch.bfloat16)
    cap, out = run_both(torch.matmul, t, v)
    _, got = only(cap)
    assert got == ("mm", 1, 15, 16, "bfloat16", "row", "col", 1, 1) and out.shape == (3, 5)


def test_matmul_of_a_vector_and_a_matrix_is_the_same_one_row_mm():
    """``matmul(u, A)`` (vector-matrix) unsqueezes u and runs aten.mm: 1 x N x K, as an mv's."""
    u, a = torch.randn(24), torch.randn(24, 40)
    cap, out = run_both(torch.matmul, u, a)
    _, got = only(cap)
    assert got == ("mm", 1, 40, 24, "float32", "row", "row", 1, 1) and out.shape == (40,)


def test_addmv_is_the_one_row_addmm_of_its_transpose():
    """``addmv(bias, A, v)``: the bias (A's rows) is the one-row addmm's bias over its N."""
    bias, a, v = torch.randn(40), torch.randn(40, 24), torch.randn(24)
    cap, _ = run_both(lambda b, m, x: torch.addmv(b, m, x), bias, a, v)
    rec, got = only(cap)
    assert got == ("addmm", 1, 40, 24, "float32", "row", "col", 1, 1) and rec.tunable


def test_mv_out_and_addmv_in_place():
    a, v, bias = torch.randn(40, 24), torch.randn(24), torch.randn(40)

    def fn(m, x, b):
        out = torch.empty(40)
        torch.mv(m, x, out=out)
        return out + b.clone().addmv_(m, x)
    cap, _ = run_both(fn, a, v, bias)
    assert sorted((r.op, r.m, r.n, r.k, r.layout_b, r.count) for r in cap.records) == [
        ("addmm", 1, 40, 24, "col", 1), ("mm", 1, 40, 24, "col", 1)]


# ------------------------------------------------------------------ out= and in-place GEMMs
def test_mm_out_counts_as_the_mm_it_runs():
    """``torch.mm(a, b, out=c)`` (aten.mm.out) and ``torch.matmul(a, b, out=c)`` (mm.out too) run
    the same GEMM as ``a @ b``: one record, count 3."""
    a, w = torch.randn(12, 32), torch.randn(48, 32)

    def fn(x, wt):
        c, d = torch.empty(12, 48), torch.empty(12, 48)
        torch.mm(x, wt.t(), out=c)
        torch.matmul(x, wt.t(), out=d)
        return c + d + x @ wt.t()
    cap, _ = run_both(fn, a, w)
    _, got = only(cap)
    assert got == ("mm", 12, 48, 32, "float32", "row", "col", 1, 3)


def test_addmm_out_and_in_place_count_as_the_addmm_they_run():
    """``torch.addmm(bias, a, b, out=c)`` (aten.addmm.out) is the addmm of ``torch.addmm(bias, a,
    b)``; ``c.addmm_(a, b)`` (aten.addmm_: ``c``, a full (M, N) matrix, is the added input) is the
    same GEMM, recorded as its mm (s57: the tuned addmm adds a bias (N,), not a matrix)."""
    bias, a, b = torch.randn(48), torch.randn(12, 32), torch.randn(32, 48)

    def fn(bi, x, y):
        c = torch.empty(12, 48)
        torch.addmm(bi, x, y, out=c)
        return c.addmm_(x, y) + torch.addmm(bi, x, y)
    cap, _ = run_both(fn, bias, a, b)
    got = sorted((r.op, r.m, r.n, r.k, r.dtype, r.layout_a, r.layout_b, r.batch, r.count) for r in cap.records)
    assert got == [("addmm", 12, 48, 32, "float32", "row", "row", 1, 2),
                   ("mm", 12, 48, 32, "float32", "row", "row", 1, 1)]


def test_bmm_out_counts_as_the_bmm_it_runs():
    a, b = torch.randn(4, 6, 16), torch.randn(4, 8, 16)

    def fn(x, y):
        c = torch.empty(4, 6, 8)
        torch.bmm(x, y.transpose(1, 2), out=c)
        return c + torch.bmm(x, y.transpose(1, 2))
    cap, _ = run_both(fn, a, b)
    rec, got = only(cap)
    assert got == ("bmm", 6, 8, 16, "float32", "row", "col", 4, 2) and rec.tunable


def test_baddbmm_out_and_in_place_are_recorded_as_baddbmm_not_tuned():
    """baddbmm (``.default``, ``.out``, ``baddbmm_``) is recorded, not tuned (no family takes a
    batched added input), as before for ``.default``; all three are one record."""
    c0, a, b = torch.randn(4, 6, 8), torch.randn(4, 6, 16), torch.randn(4, 16, 8)

    def fn(c, x, y):
        o = torch.empty(4, 6, 8)
        torch.baddbmm(c, x, y, out=o)
        return o + c.clone().baddbmm_(x, y) + torch.baddbmm(c, x, y)
    cap, _ = run_both(fn, c0, a, b)
    rec, got = only(cap)
    assert got == ("baddbmm", 6, 8, 16, "float32", "row", "row", 4, 3)
    assert not rec.tunable and "baddbmm/float32" in cap.summary()


def test_addbmm_is_recorded_not_tuned():
    """``addbmm(c, A, B)`` = c + sum over the batch of A[i] @ B[i]: the batch is part of the
    reduction, which no family runs (an mm of K = batch x K would need A's matrices side by side,
    a copy). Recorded with its batch, not tuned, in all three overloads."""
    c0, a, b = torch.randn(6, 8), torch.randn(4, 6, 16), torch.randn(4, 16, 8)

    def fn(c, x, y):
        o = torch.empty(6, 8)
        torch.addbmm(c, x, y, out=o)
        return o + c.clone().addbmm_(x, y) + torch.addbmm(c, x, y)
    cap, _ = run_both(fn, c0, a, b)
    rec, got = only(cap)
    assert got == ("addbmm", 6, 8, 16, "float32", "row", "row", 4, 3)
    assert not rec.tunable and "addbmm/float32" in cap.summary() and cap.problems() == []


# ------------------------------------------------------------------ the suite CSV
def test_mv_and_out_records_round_trip_through_the_suite(tmp_path):
    """An mv's one-row mm and an out= call's GEMM are suite rows that load back as the problems
    capture lists (what ``gemmtune tune --suite`` then tunes); the untuned addbmm is no row."""
    a, v, b = torch.randn(40, 24), torch.randn(24), torch.randn(24, 16)

    def fn(m, x, y):
        c = torch.empty(40, 16)
        torch.mm(m, y, out=c)
        return c.sum() + torch.mv(m, x).sum() + torch.addbmm(c, m[None], y[None]).sum()
    cap, _ = run_both(fn, a, v, b)
    path = cap.write_suite(tmp_path / "suite.csv")
    shapes = load_csv(path)
    assert [s.problem for s in shapes] == cap.problems()
    assert sorted((s.problem.op, s.problem.m, s.problem.n, s.problem.k, s.problem.layout_b) for s in shapes) == [
        ("mm", 1, 40, 24, "col"), ("mm", 40, 16, 24, "row")]
    rows = path.read_text().splitlines()
    assert any(line.startswith("captured,model_mm_m1,1,40,24,float32,row,col,mm,1,1,") for line in rows)


def test_gemmtune_matmul_runs_the_recorded_mv_problem():
    """The recorded problem is one ``gemmtune.matmul`` runs: the one-row operands, with the
    recorded layouts, give the mv's output."""
    a, v = torch.randn(40, 24), torch.randn(24)
    cap, out = run_both(torch.mv, a, v)
    (p,) = cap.problems()
    x, w = v[None], a.t()
    assert Problem.from_tensors(x, w).key == p.key
    torch.testing.assert_close(gemmtune.matmul(x, w, choice="aten")[0], out)
