"""The norm fold in the one-row skinny strip (kernels.skinny.run's ``norm_weight`` / ``norm_eps``):
an RMSNorm of each row x of A computed inside the GEMV, out = (x * rsqrt(mean(x^2) + eps) * g) @ W.t(),
against fp64; its -pdl twin bitwise the plain strip; the launch without it unchanged; and the
refusals. CPU: the Triton interpreter (fp16 / fp32), small shapes (about 10 s on 2 cores).

gemmtune.normfold serves it under torch.compile (tests/test_normfold_graph.py); on the H200 it measured
slower than the plain strip (benchmarks/results/2026-11-30-h200-s43, section 2).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from gemmtune.configs import SkinnyConfig
from gemmtune.epilogue import bind
from gemmtune.kernels import skinny, skinny_spec
from gemmtune.kernels.tiled import offline
from gemmtune.verify import compare

TOL = {torch.float32: 1e-5, torch.float16: 1e-3}  # relative Frobenius, as test_skinny.py's
EPS = 1e-5

# The default space's one-row layouts, narrowed to the interpreter's sizes: -flat (the [BN, BK] tile
# reduced after the loop) and -flat-sum (summed every step), both BLOCK_K past some K below.
FLAT = SkinnyConfig(1, 2, 64, 1, 1, 4, False, True, flat=True)
FLAT_SUM = SkinnyConfig(1, 4, 32, 1, 1, 2, False, True, flat=True, sum_each=True)

# (M, N, K): prime N and prime, ragged K; K = 1; N = 1 with K a multiple of both BLOCK_Ks (no K
# mask); K < BLOCK_K; M = 3 (a one-row strip runs a program a row, each with its own norm).
SHAPES = [(1, 37, 131), (1, 5, 1), (1, 1, 64), (1, 13, 20), (3, 7, 97)]


def reference(x, g, w, eps):
    """fp64: rmsnorm(x) * g, then @ w.t()."""
    xd = x.double()
    return (xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * g.double()) @ w.double().t()


def run(cfg, x, w_t, g=None, eps=None, epilogue=None):
    out = torch.full((x.shape[0], w_t.shape[1]), float("nan"), dtype=x.dtype, device=x.device)
    skinny.run(x, w_t, out, cfg, norm_weight=g, norm_eps=eps, epilogue=epilogue)
    return out


def check(out, ref, dtype, what):
    res = compare(out, ref, TOL[dtype])
    assert res.ok, f"{what}: {res.reason}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
def test_fold_against_fp64_and_its_pdl_twin(dtype, device):
    """Both one-row layouts on every shape, against fp64; the -pdl twin (first B tile peeled before
    the wait; the interpreter runs it without the wait) bitwise the plain strip, fold on."""
    for m, n, k in SHAPES:
        x = torch.randn(m, k, dtype=dtype, device=device)
        w = torch.randn(n, k, dtype=dtype, device=device)  # a Linear's weight: B = w.t(), K-contiguous
        g = torch.rand(k, dtype=dtype, device=device) + 0.5  # an RMSNorm weight's range, never 0
        ref = reference(x, g, w, EPS)
        for cfg in (FLAT, FLAT_SUM):
            got = run(cfg, x, w.t(), g, EPS)
            check(got, ref, dtype, (m, n, k, cfg.id))
            assert torch.equal(run(replace(cfg, pdl=True), x, w.t(), g, EPS), got), (m, n, k, cfg.id)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
def test_unit_weight_fold_against_fp64(dtype, device):
    """norm_eps alone: a unit-weight norm over a B that holds the norm's weight (diag(g) @ W.t()),
    the fold that reads no g; against fp64 on every shape, both one-row layouts."""
    for m, n, k in SHAPES:
        x = torch.randn(m, k, dtype=dtype, device=device)
        w = torch.randn(n, k, dtype=dtype, device=device)
        g = torch.rand(k, dtype=dtype, device=device) + 0.5
        wg = (w.double() * g.double()).to(dtype)  # the weight with g multiplied in, rounded once
        ref = reference(x, torch.ones_like(g), wg, EPS)
        for cfg in (FLAT, FLAT_SUM):
            check(run(cfg, x, wg.t(), None, EPS), ref, dtype, (m, n, k, cfg.id))


@pytest.mark.parametrize("x_layout", ["offset", "strided", "col"])
def test_fold_on_offset_and_strided_views(x_layout, operand, device):
    """x unaligned, with no unit stride, or transposed (M = 3: K's stride is 3); the weight unaligned,
    every other column of a wider one (no unit stride), or rows padded past K; g strided. fp16."""
    m, n, k = 3, 11, 83
    x = operand(m, k, x_layout, torch.float16)
    g = (torch.rand(2 * k, dtype=torch.float16, device=device) + 0.5)[::2]
    buf = torch.randn(n * k + 1, dtype=torch.float16, device=device)
    weights = {"offset": buf[1:].view(n, k),
               "strided": torch.randn(n, 2 * k, dtype=torch.float16, device=device)[:, ::2],
               "padded": torch.randn(n, k + 5, dtype=torch.float16, device=device)[:, :k]}
    for name, w in weights.items():
        check(run(FLAT_SUM, x, w.t(), g, EPS), reference(x, g, w, EPS), torch.float16, (x_layout, name))


def test_fold_scales_before_the_epilogue(device):
    """A bias, SiLU and a residual (Qwen2's q/k/v carry a bias) apply to the normalised product, as
    they do unfused: silu(rmsnorm(x) * g @ w.t() + bias) + residual."""
    m, n, k = 1, 19, 70
    x = torch.randn(m, k, dtype=torch.float16, device=device)
    w = torch.randn(n, k, dtype=torch.float16, device=device)
    g = torch.rand(k, dtype=torch.float16, device=device) + 0.5
    bias = torch.randn(n, dtype=torch.float16, device=device)
    res = torch.randn(m, n, dtype=torch.float16, device=device)
    epi = bind(m, n, torch.float16, x.device, bias=bias, activation="silu", residual=res)
    ref = torch.nn.functional.silu(reference(x, g, w, EPS) + bias.double()) + res.double()
    for cfg in (FLAT, FLAT_SUM):
        check(run(cfg, x, w.t(), g, EPS, epilogue=epi), ref, torch.float16, cfg.id)


def test_without_the_fold_the_launch_is_the_plain_kernels(device):
    """No norm_weight: the plain kernel (_skinny_kernel, its parameters as before the fold) with the
    very arguments and constexprs that _args gives, so its prepared launches and code are untouched;
    and its result is the GEMM's, the fold's kernel launched only with the weight."""
    x = torch.randn(1, 40, dtype=torch.float16, device=device)
    w = torch.randn(9, 40, dtype=torch.float16, device=device)
    out = torch.empty(1, 9, dtype=torch.float16, device=device)
    for cfg in (FLAT, FLAT_SUM, SkinnyConfig(1, 4, 64, 1, 1, 2, False, True)):
        with offline() as launches:
            skinny.run(x, w.t(), out, cfg)
            if cfg.flat:
                skinny.run(x, w.t(), out, cfg, norm_weight=torch.rand(40, dtype=torch.float16, device=device),
                           norm_eps=EPS)
        _, args, consts = skinny._args(x, w.t(), out, cfg, None, None, False)
        fn, _, got_args, got_kwargs = launches[0]
        assert fn is skinny._skinny_kernel and len(got_args) == len(args), cfg.id
        # tensors by identity or (views made afresh by w.t()) by storage and strides; scalars by value
        for got, want in zip(got_args, args):
            if isinstance(want, torch.Tensor):
                assert (got.data_ptr(), got.stride(), got.shape) == (want.data_ptr(), want.stride(), want.shape)
            else:
                assert got == want, cfg.id
        assert {k: v for k, v in got_kwargs.items() if k in consts} == consts and "NORM" not in got_kwargs
        assert len(fn.arg_names) == len(args) + len(consts), "the plain kernel's parameters changed"
        if cfg.flat:
            assert launches[1][0] is skinny._skinny_fold_kernel
        check(run(cfg, x, w.t()), x.double() @ w.double().t(), torch.float16, cfg.id)


def test_fold_refuses_where_it_does_not_apply(device):
    """A ValueError naming why: a K split, a strip of several rows (M > 1 or not), the 3-D one-row
    strip, tl.dot and stream-K configs, an N-contiguous B, a norm weight of the wrong shape, dtype or
    device, and eps missing or not a number (eps alone is the unit-weight fold)."""
    m, n, k = 2, 6, 300
    x = torch.randn(m, k, dtype=torch.float16, device=device)
    w = torch.randn(n, k, dtype=torch.float16, device=device)
    g = torch.ones(k, dtype=torch.float16, device=device)
    for cfg, why in ((replace(FLAT, split_k=2), "2 K-slices"),
                     (SkinnyConfig(4, 4, 64, 1, 1, 2, False, True, flat=True, sum_each=True), "BLOCK_M=4 rows"),
                     (SkinnyConfig(1, 4, 64, 1, 1, 2, False, True), "3-D strip"),
                     (SkinnyConfig(16, 16, 32, 1, 2, 4, True, True), "tl.dot"),
                     (SkinnyConfig(16, 16, 32, 1, 2, 4, True, False, 7), "tl.dot")):
        with pytest.raises(ValueError, match=why):
            run(cfg, x, w.t(), g, EPS)
    with pytest.raises(ValueError, match="N-contiguous"):
        run(FLAT, x, torch.randn(k, n, dtype=torch.float16, device=device), g, EPS)
    for bad, why in ((torch.ones(k + 1, dtype=torch.float16, device=device), "shape"),
                     (torch.ones(1, k, dtype=torch.float16, device=device), "shape"),
                     (torch.ones(k, dtype=torch.float32, device=device), "float32"),
                     (torch.ones(k, dtype=torch.float16, device="meta"), "meta"),
                     (g.tolist(), "torch.Tensor")):
        with pytest.raises(ValueError, match=why):
            run(FLAT, x, w.t(), bad, EPS)
    for g_, eps, why in ((g, None, "norm_eps is required"), (None, float("nan"), "finite"),
                         (g, float("nan"), "finite"), (g, -1e-6, "finite"), (g, "1e-6", "finite")):
        with pytest.raises(ValueError, match=why):
            run(FLAT, x, w.t(), g_, eps)
    # the pure check a fusing pass would ask before it folds (no Triton in skinny_spec)
    assert skinny_spec.fold_misfit(FLAT_SUM, 1, 4096) is None
    assert "K-slices" in skinny_spec.fold_misfit(replace(FLAT_SUM, split_k=4), 1, 4096)


def test_skinny_spec_doctests():
    import doctest

    assert doctest.testmod(skinny_spec).failed == 0
