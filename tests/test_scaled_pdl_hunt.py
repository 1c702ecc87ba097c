"""CPU hunt of ``gemmtune.pdl`` (the ``-pdl`` twins) and ``gemmtune.scaled`` (fp8 scaled_mm):
each test is a defect found there, failing before its fix."""
from __future__ import annotations

import warnings

import pytest
import torch

import gemmtune
from gemmtune.configs import Choice
from gemmtune.dispatch.common import _current_provenance
from gemmtune.pdl import twin_dispatcher
from gemmtune.problem import Problem
from gemmtune.table.types import LookupTable, TableChoice

E4M3 = torch.float8_e4m3fn
STRIP = "skinny:BM1-BN2-BK128-SK1-S1-W4-core-det"
TWIN = STRIP + "-pdl"


def _aten(problems, **kw):
    return {p.key: "aten" for p in problems}


# ------------------------------------------------------------------ gemmtune.pdl
@pytest.mark.parametrize("op", ["mm", "addmm"])
def test_twin_dispatcher_twins_the_strips_of_its_table_behind_cublas_hints(op):
    # Defect: twin_dispatcher returned ``d`` itself (no twin) whenever its hint winners had no
    # twin, without looking at its table, whose strips a table dispatcher serves first (its exact
    # mm entries; the addmm entries of calls with a bias): those ran plain under pdl=True.
    key = Problem.from_sizes(1, 96, 131, "fp32", layout_b="col", op=op).key
    table = LookupTable(_current_provenance("by-hand"), {key: [TableChoice(Choice.parse(STRIP))]})
    d = gemmtune.compile_mm(n=96, k=131, dtype="fp32", layout_b="col", hints={"m": [8]}, mode="table",
                            table=table, tune_fn=_aten)
    t = twin_dispatcher(d)
    assert t is not d and [tc.choice.id for tc in t.table.entries[key]] == [TWIN]
    assert [tc.choice.id for tc in d.table.entries[key]] == [STRIP]  # d untouched
    a, b = torch.randn(1, 131), torch.randn(96, 131).t()
    bias = torch.randn(96) if op == "addmm" else None
    want = a.double() @ b.double() + (0 if bias is None else bias.double())
    torch.testing.assert_close(t(a, b, bias=bias).double(), want, rtol=1e-4, atol=1e-4)
    got = t.addmm_decisions[(1, 96, 131)] if op == "addmm" else t.decision(m=1)
    assert got.choice.id == TWIN
    # a strip of another dispatcher's shape (a table shared by a model's layers) needs no twin here
    other = Problem.from_sizes(1, 64, 131, "fp32", layout_b="col", op=op).key
    table = LookupTable(_current_provenance("by-hand"), {other: [TableChoice(Choice.parse(STRIP))]})
    d = gemmtune.compile_mm(n=96, k=131, dtype="fp32", layout_b="col", hints={"m": [8]}, mode="table",
                            table=table, tune_fn=_aten)
    assert twin_dispatcher(d) is d


@pytest.mark.parametrize("entry", ["tune_model", "patch"])
@pytest.mark.parametrize("what", ["training", "before_hopper"])
def test_pdl_warnings_point_at_the_callers_line(monkeypatch, entry, what):
    # Defect: the pdl warnings had fixed stacklevels, right for one depth only: the training
    # warning, from tune_model (through _tune_model), named modeltune.py; the pre-Hopper one
    # (four frames up from _too_old) named nn.py from patch and modeltune.py from tune_model.
    import gemmtune.pdl as pdl
    if what == "before_hopper":
        monkeypatch.setattr(pdl, "_capability", lambda: (8, 0))
    model = torch.nn.Sequential(torch.nn.Linear(131, 96)).requires_grad_(what == "training")

    def strips(problems, **kw):
        return {p.key: STRIP if p.m == 1 else "aten" for p in problems}

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        if entry == "tune_model":
            gemmtune.tune_model(model, [(torch.randn(1, 131),)], tune_fn=strips, pdl=True)
        else:
            gemmtune.patch(model, tune_fn=strips, pdl=True, progress=False, hints={"m": [1]})
    match = "require grad" if what == "training" else "needs compute capability 9.0"
    hits = [w for w in got if match in str(w.message)]
    assert hits and all(w.filename == __file__ for w in hits), [(w.filename, w.lineno) for w in hits]


# ------------------------------------------------------------------ gemmtune.scaled
@pytest.mark.parametrize("choice", [None, "aten"])
def test_scaled_mm_on_meta_tensors_gives_the_shape_as_torch_does(choice):
    # Defect: bind_scales takes meta scales (it skips the finite check there), and torch._scaled_mm
    # gives a meta result, but scaled_mm reached ``torch._scaled_mm(..., out=)``, which has no meta
    # kernel: a NotImplementedError from deep inside torch. gemmtune.matmul gives the meta result.
    a = torch.empty(8, 32, device="meta").to(E4M3)
    b = torch.empty(32, 32, device="meta").to(E4M3).t()
    sa, sb = torch.empty(8, 1, device="meta"), torch.empty(1, 32, device="meta")
    want = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    out = gemmtune.scaled_mm(a, b, sa, sb, choice=choice)
    assert (out.device, out.shape, out.dtype) == (want.device, want.shape, want.dtype)
    with pytest.raises(ValueError, match=r"scale_a must have shape \(8, 1\)"):  # the checks still run
        gemmtune.scaled_mm(a, b, sb, sb, choice=choice)


@pytest.mark.parametrize("op", ["mm", "scaled_mm"])
def test_tuning_credits_the_pdl_twin_only_where_a_dispatcher_serves_it(op):
    # Defect: tune(pdl_credit=...) credited every one-slice CUDA-core strip on a K-contiguous B,
    # scaled_mm problems' too; but only a dispatcher serves -pdl twins (pdl.attach_twins), never
    # gemmtune.scaled_mm, which runs the table's plain strip: a strip 1% slower than cuBLAS alone
    # won an fp8 shape and ran 1% slower there, with nothing to gain it back.
    from types import SimpleNamespace as R

    from gemmtune.bench.status import Status
    from gemmtune.shapes import Shape
    from gemmtune.tuning.recorder import summarize

    strip = "skinny:BM1-BN8-BK512-SK1-S1-W4-core-det"
    if op == "mm":
        p = Problem.from_sizes(1, 4096, 4096, "bf16", layout_b="col")
    else:
        p = Problem.from_sizes(1, 4096, 4096, "e4m3", layout_b="col", op="scaled_mm", scale="tensor")
    rows = {c: R(choice_id=c, status=Status.OK, device_ms=ms, reason=None)
            for c, ms in ((strip, 1.01), ("aten", 1.0))}
    db = R(done=lambda ctx, key, tag: rows)
    got = summarize(Shape("g", "s", p), [Choice.parse(strip), Choice.parse("aten")], db, None, 0.0, 0.02)
    assert got.best == (strip if op == "mm" else "aten")


def test_scaled_mm_refuses_a_dual_or_vmapped_input_by_name():
    # Defect: under forward-mode AD a Triton choice read the dual scale's primal and returned a
    # result with no tangent, without a word (torch._scaled_mm, and the aten choice, raise: it has
    # no forward derivative); under vmap the batched scale failed deep in the finite check
    # ("data-dependent control flow"). Plain inputs under a dual level still run.
    import torch.autograd.forward_ad as fwAD

    a = torch.randn(16, 32).to(E4M3)
    b = torch.randn(32, 32).to(E4M3).t()
    sa, sb = torch.rand(()) + 0.5, torch.rand(()) + 0.5
    want = gemmtune.scaled_mm(a, b, sa, sb, choice="aten")
    with fwAD.dual_level():
        dual = fwAD.make_dual(sa, torch.ones(()))
        for choice in ("triton_mm:BM32-BN32-BK32-S1-W4-G8", "aten"):
            with pytest.raises(NotImplementedError, match="forward-mode AD.*scale_a"):
                gemmtune.scaled_mm(a, b, dual, sb, choice=choice)
        assert torch.equal(gemmtune.scaled_mm(a, b, sa, sb, choice="aten"), want)
    with pytest.raises(NotImplementedError, match="torch.func.*scale_a"):
        torch.func.vmap(lambda s: gemmtune.scaled_mm(a, b, s, sb, choice="aten"))(torch.rand(3) + 0.5)


@pytest.mark.parametrize("m, n, k, layout_b", [(8, 32, 32, "col"), (5, 7, 33, "row")])
def test_scaled_mm_default_runs_row_wise_fp32_on_a_cpu_without_the_interpreter(monkeypatch, m, n, k, layout_b):
    # Defect: the README says the default runs pad+aten on a CPU without TRITON_INTERPRET=1, but
    # row-wise scales with an fp32 output default to triton_mm (cuBLASLt's row-wise GEMM writes bf16
    # only), and pad+aten refuses them by the same rule: a ValueError for a documented input.
    from gemmtune import api
    from gemmtune.scaled import reference

    monkeypatch.setattr(api, "interpreter_enabled", lambda: False)
    a = torch.randn(m, k).to(E4M3)
    b = (torch.randn(n, k).t() if layout_b == "col" else torch.randn(k, n)).to(E4M3)
    sa, sb = torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5
    bias = torch.randn(n)
    out = gemmtune.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.float32)
    ref = reference(a, b, sa, sb, bias)
    assert out.shape == (m, n) and out.dtype == torch.float32
    assert (out.double() - ref).abs().max().item() <= 5e-3 * ref.abs().max().item()


@pytest.mark.parametrize("out_dtype", [torch.float64, torch.bool, "nope", 5])
def test_scaled_mm_names_out_dtype_when_it_is_no_dtype_gemmtune_knows(out_dtype):
    # Defect: an out_dtype gemmtune knows no name for raised dtype_name's "unsupported dtype ...;
    # gemmtune multiplies float16, ..., float8_e5m2", naming neither out_dtype nor its two choices
    # (and listing fp16 and fp8, which it refuses); float16 got "out_dtype must be one of".
    a, b, one = torch.ones(16, 32).to(E4M3), torch.ones(16, 32).to(E4M3).t(), torch.ones(())
    with pytest.raises(TypeError, match=r"out_dtype must be one of \('bfloat16', 'float32'\), got"):
        gemmtune.scaled_mm(a, b, one, one, out_dtype=out_dtype, choice="aten")
