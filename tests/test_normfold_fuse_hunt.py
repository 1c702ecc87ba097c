"""Hunt: gemmtune.normfold's ``gemmtune::rms_mm`` kernel path and fuse_compile's fold of a norm into
a merged group, on the CPU (the Triton interpreter; fp16 / fp32; no compile: the op is called, or
the pass run on a traced graph)."""

from __future__ import annotations

import warnings

import pytest
import torch

import gemmtune
from gemmtune import fuse_compile
from gemmtune.normfold import fold_reference
from gemmtune.verify import compare

FOLDS = "skinny:BM1-BN16-BK64-SK1-S1-W4-core-det-flat-sum"  # one-row -flat strip: folds at K = 64
NO_FOLD = "skinny:BM1-BN16-BK64-SK1-S1-W4-core-det"  # the 3-D strip: fold_misfit refuses it
TOL = {torch.float16: 2e-3, torch.float32: 1e-5}  # relative Frobenius against fp64
DTYPES = pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
K, EPS = 64, 1e-5


def _patched(n: int, dtype, choice: str):
    """A patched Linear [n, K] whose M = 1 choice is ``choice`` (by table)."""
    from gemmtune.configs import Choice
    from gemmtune.problem import Problem, dtype_name
    from gemmtune.provenance import Provenance
    from gemmtune.table import LookupTable, TableChoice

    m = torch.nn.Sequential(torch.nn.Linear(K, n, bias=False)).to(dtype).requires_grad_(False)
    key = Problem.from_sizes(1, n, K, dtype_name(dtype), layout_b="col").key
    table = LookupTable(Provenance.current("by-hand").to_dict(), {key: [TableChoice(Choice.parse(choice))]})
    gemmtune.patch(m, table, hints={"m": [1]}, tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
    return m[0]


def _check(got, x, g, b, dtype):
    assert got.dtype == dtype and got.shape == (x.shape[0], b.shape[1])
    res = compare(got, fold_reference(x, g, EPS, b), TOL[dtype])
    assert res.ok, res.reason


@DTYPES
def test_rms_mm_where_the_choice_cannot_fold_runs_the_norm_then_the_gemm(dtype):
    # _first returned the bare _fallback(d, ...), which run called without d: TypeError on every
    # shape whose choice does not fold (a 3-D strip, cuBLAS, a refused check)
    lin = _patched(24, dtype, NO_FOLD)
    x, g = torch.randn(1, K, dtype=dtype), torch.rand(K, dtype=dtype) + 0.5
    b = lin.weight.t()
    for _ in range(2):  # the first call decides, the second takes the decision
        _check(torch.ops.gemmtune.rms_mm(x, g, EPS, b, lin._gemmtune_handle), x, g, b, dtype)


@DTYPES
def test_rms_mm_a_later_call_with_another_b_layout_is_not_given_the_first_calls_fold(dtype):
    # the per-shape memo had no B layout: a K-contiguous B folded, then an N-contiguous B of the same
    # shape was sent to the fold too, and check_fold raised instead of the norm running in torch
    lin = _patched(24, dtype, FOLDS)
    h = lin._gemmtune_handle
    x, g = torch.randn(1, K, dtype=dtype), torch.rand(K, dtype=dtype) + 0.5
    b = lin.weight.t()
    _check(torch.ops.gemmtune.rms_mm(x, g, EPS, b, h), x, g, b, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (the fold's refusal of that B, warned once)
        _check(torch.ops.gemmtune.rms_mm(x, g, EPS, b.contiguous(), h), x, g, b, dtype)


class _NormThenGroup(torch.nn.Module):
    """transformers' RMSNorm chain cast back to ``cast`` (x's dtype in Llama), then two members of
    one fused, patched Linear reading it (as member_forward emits them under torch.compile)."""

    def __init__(self, lin, cast):
        super().__init__()
        self.fused, self.cast = lin, cast
        self.g = torch.nn.Parameter(torch.rand(K, dtype=lin.weight.dtype) + 0.5, requires_grad=False)
        self.n, self.hd = lin.weight.shape[0] // 2, lin._gemmtune_handle  # (constants in the trace)

    def forward(self, x):
        h = x.to(torch.float32)
        y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
        out = self.g * y.to(self.cast)
        fw, n, hd = self.fused.weight, self.n, self.hd
        return (torch.ops.gemmtune.fused_member(out, fw[:n], None, fw, None, 0, n, hd),
                torch.ops.gemmtune.fused_member(out, fw[n:], None, fw, None, n, n, hd))


def _merged(module, *xs):
    """``module`` traced, its nodes given fake values (as dynamo's graph has) and merged by the pass;
    the number of folds."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    gm = torch.fx.symbolic_trace(module)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    FakeTensorProp(gm, mode).propagate(*(mode.from_tensor(x) for x in xs))
    before = fuse_compile.STATS["folded"]
    assert fuse_compile.merge(gm.graph) == 1
    gm.recompile()
    return gm, fuse_compile.STATS["folded"] - before


@pytest.mark.parametrize("x_dtype, dtype, folds", [(torch.float32, torch.float16, 0), (torch.float16, torch.float16, 1),
                                                   (torch.float32, torch.float32, 1)])
def test_a_norm_cast_to_another_dtype_than_its_input_is_not_folded(x_dtype, dtype, folds, monkeypatch):
    # an fp32 residual stream under an fp16 norm and Linear: the cast's dtype was never read, the
    # chain folded into rms_mm, whose norm is in x's dtype: fp32 into an fp16 GEMM, a TypeError
    monkeypatch.setenv("GEMMTUNE_FOLD_NORMS", "1")
    module = _NormThenGroup(_patched(32, dtype, FOLDS), dtype)
    x = torch.randn(1, 1, K, dtype=x_dtype)
    want = module(x)
    gm, folded = _merged(module, x)
    assert folded == folds
    for got, ref in zip(gm(x), want):
        assert got.dtype == ref.dtype and compare(got, ref.double(), TOL[dtype]).ok


class _GroupThenView(torch.nn.Module):
    """Two members of a plain fused Linear (handle -1) at M = 2; the first's output read by ``how``."""

    def __init__(self, how):
        super().__init__()
        self.fused, self.how = torch.nn.Linear(K, 32).requires_grad_(False), how

    def forward(self, x, t):
        fw, fb = self.fused.weight, self.fused.bias
        a = torch.ops.gemmtune.fused_member(x, fw[:16], fb[:16], fw, fb, 0, 16, -1)
        b = torch.ops.gemmtune.fused_member(x, fw[16:], fb[16:], fw, fb, 16, 16, -1)
        return (a.view_as(t) if self.how == "view_as" else a.view(torch.int32)), b


@pytest.mark.parametrize("how", ["view_as", "view_dtype"])
def test_a_merged_members_view_as_or_dtype_view_runs(how):
    # the merged member's output is a strided slice: view_as merging its dims was left a view (fails
    # as .view did before it became a reshape), and .view(dtype) was made reshape(dtype), a TypeError
    module = _GroupThenView(how)
    x, t = torch.randn(2, K), torch.empty(32)
    want = module(x, t)
    gm, _ = _merged(module, x, t)
    for got, ref in zip(gm(x, t), want):
        assert got.dtype == ref.dtype and got.shape == ref.shape
        if ref.dtype == torch.int32:  # the bits of the fp32 output, compared as floats
            got, ref = got.view(torch.float32), ref.view(torch.float32)
        assert compare(got, ref.double(), TOL[torch.float32]).ok


@pytest.mark.parametrize("g_shape, folds", [((K,), 1), ((1, 1, K), 0)])
def test_a_norm_weight_that_is_not_k_long_is_not_folded(g_shape, folds, monkeypatch):
    # a (1, 1, K) weight broadcasts to x's shape in the model; folded, rms_mm's norm of the 2-D x
    # came out 3-D (x 2-D times g 3-D) and the GEMM refused it at run time
    monkeypatch.setenv("GEMMTUNE_FOLD_NORMS", "1")
    module = _NormThenGroup(_patched(32, torch.float16, FOLDS), torch.float16)
    module.g = torch.nn.Parameter((torch.rand(K, dtype=torch.float16) + 0.5).view(g_shape), requires_grad=False)
    x = torch.randn(1, 1, K, dtype=torch.float16)
    want = module(x)
    gm, folded = _merged(module, x)
    assert folded == folds
    for got, ref in zip(gm(x), want):
        assert got.shape == ref.shape and compare(got, ref.double(), TOL[torch.float16]).ok


class _AddForms(_NormThenGroup):
    """The chain with its ``var + eps`` written as ``torch.add`` with keywords."""

    def __init__(self, lin, cast, form):
        super().__init__(lin, cast)
        self.form = form

    def forward(self, x):
        h = x.to(torch.float32)
        var = h.pow(2).mean(-1, keepdim=True)
        # alpha=1e4 makes the eps the model adds 0.1, not EPS
        add = torch.add(var, other=EPS) if self.form == "other" else torch.add(var, EPS, alpha=1e4)
        out = self.g * (h * torch.rsqrt(add)).to(self.cast)
        fw, n, hd = self.fused.weight, self.n, self.hd
        return (torch.ops.gemmtune.fused_member(out, fw[:n], None, fw, None, 0, n, hd),
                torch.ops.gemmtune.fused_member(out, fw[n:], None, fw, None, n, n, hd))


@pytest.mark.parametrize("form, folds", [("other", 1), ("alpha", 0)])
def test_the_eps_sum_written_with_keywords(form, folds, monkeypatch):
    # torch.add(var, other=eps): the matcher indexed add.args[1], an IndexError out of the pass (the
    # user's compile failed); torch.add(var, eps, alpha=a) was matched with eps, not a * eps
    monkeypatch.setenv("GEMMTUNE_FOLD_NORMS", "1")
    module = _AddForms(_patched(32, torch.float32, FOLDS), torch.float32, form)
    x = torch.randn(1, 1, K) * 0.1  # mean(x^2) ~ 0.01: an eps of 0.1 against 1e-5 shows
    want = module(x)
    gm, folded = _merged(module, x)
    assert folded == folds
    for got, ref in zip(gm(x), want):
        assert compare(got, ref.double(), TOL[torch.float32]).ok
