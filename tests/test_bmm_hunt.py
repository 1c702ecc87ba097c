"""CPU hunt of the batched and scaled paths: ``op='bmm'`` (gemmtune.matmul on 3-D operands, the
dispatcher's bmm decisions, ``route_bmm``, ``compile_bmm``), FP8 ``scaled_mm`` and the gradients
through both (gemmtune.autograd).

What was tried, beyond the defects tested here: every README bmm / scaled_mm example; bmm on
broadcast (batch stride 0), transposed-batch, batch-last, sliced, offset and overlapping views,
B = 0 / 1, M / N / K = 0 / 1 and primes, fp16 and fp32, fp32 output, for aten, triton_mm and their
pad+ variants (matmul and a table dispatcher, cached and first calls), against fp64; gradients
(and double backward, torch.func.grad / vmap) of those against torch's in fp64; scaled_mm with
tensor- and row-wise scales ((M, 1), (M,), expanded), wrong scale shapes, dtypes, Python floats,
NaN, mixed modes, bias dtypes and shapes, out dtypes, e5m2 A / B, odd and empty sizes, every
family in the interpreter at an fp32 output; the CLI's bmm and scaled_mm shape and option errors.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import gemmtune
from gemmtune import Problem
from gemmtune.configs import Choice
from gemmtune.table import LookupTable, TableChoice, provenance

TILE = "triton_mm:BM16-BN16-BK16-S1-W1-G8"
TOL = {torch.float32: 1e-4, torch.float16: 1e-2}


def _assert_bmm(out, a, b):
    ref = torch.bmm(a.double(), b.double())
    assert out.shape == ref.shape and out.dtype == a.dtype
    tol = TOL[a.dtype]
    assert (out.double() - ref).abs().max().item() <= tol * max(1.0, ref.abs().max().item())


def _table(*problems: Problem) -> LookupTable:
    return LookupTable(provenance("t", "interp", "x", "x", "x", "by-hand"),
                       {p.key: [TableChoice(Choice.parse(TILE), 1e-3)] for p in problems})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_route_bmm_serves_the_tables_entry_for_the_calls_own_layouts(dtype):
    # Defect: a bmm table entry with a column-major or broadcast B (q @ k^T, as capture and the bmm
    # preset key it) was never served by route_bmm / lookup, which looked up the declared row/row key.
    dt = "fp32" if dtype == torch.float32 else "fp16"
    q, k, v = (torch.randn(3, 9, 16, dtype=dtype) for _ in range(3))
    w = torch.randn(16, 5, dtype=dtype).expand(3, 16, 5)
    qk = Problem.from_sizes(9, 9, 16, dt, layout_b="col", op="bmm", batch=3)
    pw = Problem.from_sizes(9, 5, 16, dt, layout_b="bcast_row", op="bmm", batch=3)
    assert qk.key == Problem.from_tensors(q, k.transpose(1, 2)).key
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the hand-made table's provenance
        with gemmtune.nn.route_bmm(_table(qk, pw), dtype=dt) as r:
            s = q @ k.transpose(1, 2)
            o = torch.bmm(v, w)
    assert r.routed == 2
    _assert_bmm(s, q, k.transpose(1, 2))
    _assert_bmm(o, v, w)
    for sizes in ((3, 9, 9, 16), (3, 9, 5, 16)):
        dec = r.dispatcher.decisions[sizes]
        assert (dec.choice.id, dec.source, dec.verified) == (TILE, "table", True), (sizes, dec)


@pytest.mark.parametrize("kwargs, err, match", [
    ({"choice": "no_such_family"}, ValueError, "unknown kernel family"),
    ({"choice": 5}, TypeError, "choice must be"),
    ({"choice": "splitk:BM16-BN16-BK32-S1-W2-G8-SK2-det"}, ValueError, "does not serve bmm"),
    ({"workspace": object()}, TypeError, "workspace must be"),
])
def test_an_empty_batch_checks_the_choice_as_a_batch_of_one(kwargs, err, match):
    # Defect: at batch 0 gemmtune.matmul accepted any choice (a typo, a non-string, a family that
    # refuses every bmm) and any workspace, which the same call raised on at batch 1.
    for batch in (1, 0):
        a, b = torch.randn(batch, 5, 7), torch.randn(batch, 7, 3)
        with pytest.raises(err, match=match):
            gemmtune.matmul(a, b, **kwargs)
    a, b = torch.randn(0, 5, 7), torch.randn(0, 7, 3)
    assert gemmtune.matmul(a, b, choice=TILE).shape == (0, 5, 3)  # a choice that serves a bmm still does


def test_compile_bmm_refuses_a_broadcast_layout_before_tuning():
    # Defect: compile_bmm(layout_b='bcast_row') tuned every hint problem, then the Dispatcher refused
    # the layout: the tuning (minutes on a GPU) was lost to a late error.
    tuned = []

    def tune_fn(ps, **kw):
        tuned.extend(ps)
        return {p.key: TILE for p in ps}

    with pytest.raises(ValueError, match="layout_b must be one of .*bcast_row"):
        gemmtune.compile_bmm(batch=4, n=16, k=16, dtype="fp32", hints={"m": [8]}, tune_fn=tune_fn,
                             layout_b="bcast_row")
    assert tuned == []
    # the declared row layout serves a broadcast B
    d = gemmtune.compile_bmm(batch=4, n=16, k=16, dtype="fp32", hints={"m": [8]}, tune_fn=tune_fn)
    a, b = torch.randn(4, 5, 16), torch.randn(16, 16).expand(4, 16, 16)
    _assert_bmm(d(a, b), a, b)


@pytest.mark.parametrize("m, n, k, layout_b", [(5, 7, 33, "col"), (16, 32, 48, "row"), (16, 32, 0, "col")])
def test_scaled_mm_default_choice_runs_on_a_cpu_without_the_interpreter(monkeypatch, m, n, k, layout_b):
    # Defect: on a CPU without TRITON_INTERPRET, scaled_mm's default for a shape torch._scaled_mm
    # cannot take as laid out (N, K not multiples of 16; B row-major; K = 0) was triton_mm, which
    # raised, advising choice='aten', which refuses the same shape; pad+aten runs it.
    from gemmtune import api
    from gemmtune.scaled import reference

    monkeypatch.setattr(api, "interpreter_enabled", lambda: False)
    a = torch.randn(m, k).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k).t() if layout_b == "col" else torch.randn(k, n)).to(torch.float8_e4m3fn)
    sa, sb = torch.rand(()) + 0.5, torch.rand(()) + 0.5
    bias = torch.randn(n)
    out = gemmtune.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.float32)
    ref = reference(a, b, sa, sb, bias)
    assert out.shape == (m, n) and out.dtype == torch.float32
    assert (out.double() - ref).abs().max().item() <= 5e-3 * ref.abs().max().item()
    with pytest.raises(ValueError, match="pad\\+aten"):  # an explicit Triton choice says what runs here
        gemmtune.scaled_mm(a, b, sa, sb, choice="triton_mm:BM16-BN16-BK32-S1-W1-G8")
