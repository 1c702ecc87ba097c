"""Review of the 3xTF32 K-major pad+ path (ec43adc: precision.pads_b_kmajor, Problem.padded,
kernels.run_choice / _prepare_padded, padcache.get(kmajor=), tuning.plan.kmajor_twins), of the
analytic model's 3xTF32 charges (dc03e15) and of topk.with_short_k_persistent (3892cf5).

One defect found: ``gemmtune inspect`` (kernelinfo.inspect_choice) ran every choice with TF32 off,
so a "+tf32" fp32 problem was inspected as 3xTF32 products and, for a pad+ choice, on a K-major copy
of B that neither the tuner's run nor Problem.padded() has. The other tests pin what the review
checked and found right (the copy against fp64 through both output paths and every epilogue, a
weight's cached copy across in-place updates and precision switches, bmm and IEEE unchanged): each
can fail, and none needs a GPU (the interpreter computes fp32 dots as fp32)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gemmtune
from gemmtune import precision
from gemmtune.kernels import padcache, tiled

SRC = str(Path(__file__).resolve().parents[1] / "src")
TOL = {torch.float32: 1e-5, torch.float16: 2e-3}

pytestmark = pytest.mark.skipif(torch.cuda.is_available() or not tiled._INTERPRETED,
                                reason="the CPU interpreter's runs (the GPU tests are test_fp32_precision's)")


def _mode(monkeypatch, value):
    monkeypatch.setattr(precision, "_FP32_ON_DEVICE", [value])


def _rel(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


def _spy(monkeypatch, module):
    """The (A, B) strides each launch of ``module``'s family gets."""
    seen, real = [], module.run

    def run(a, b, out, cfg, **kw):
        seen.append((a.stride(), b.stride()))
        return real(a, b, out, cfg, **kw)
    monkeypatch.setattr(module, "run", run)
    return seen


# Defect: inspect ignored the problem's allow_tf32 (3xTF32 products and a K-major B copy for a "+tf32" problem)
def test_inspect_runs_a_tf32_problem_as_the_tuner_does():
    code = """
import torch
from gemmtune import kernelinfo, precision
from gemmtune.problem import Problem
precision._FP32_ON_DEVICE[:] = ["tf32x3"]
seen = []
kernelinfo._compile = lambda fn, grid, args, kwargs, arch: seen.append((args, kwargs))
for tf32 in (True, False):
    seen.clear()
    kernelinfo.inspect_choice("pad+triton_mm:BM32-BN32-BK32-S2-W4-G8", Problem.from_sizes(37, 29, 131, "fp32", allow_tf32=tf32))
    (args, kw), = seen
    b = [t for t in args if isinstance(t, torch.Tensor)][1]
    print(tf32, kw["INPUT_PRECISION"], b.stride(0) == 1)
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # inspect compiles real kernels
    env["PYTHONPATH"] = SRC
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    # +tf32: TF32 products on a row-major copy (Problem.padded: 'row'); TF32 off: 3xTF32 on a K-major one
    assert r.stdout.split("\n")[:2] == ["True tf32 False", "False tf32x3 True"], r.stdout


# Checked, no defect: the K-major copy through the temporary (N padded) and in-place (TMA_EDGES) paths, every epilogue
@pytest.mark.parametrize("family", ["triton_mm", "persistent_tma"])
@pytest.mark.parametrize("shape", [(37, 29, 131), (5, 1, 8), (6, 5, 1), (9, 16, 16)])
@pytest.mark.parametrize("epi", ["none", "bias_relu", "residual"])
def test_a_kmajor_pad_choice_matches_fp64_on_both_output_paths(monkeypatch, family, shape, epi):
    from gemmtune.kernels import persistent, triton_mm

    _mode(monkeypatch, "tf32x3")
    seen = _spy(monkeypatch, triton_mm if family == "triton_mm" else persistent)
    m, n, k = shape
    g = torch.Generator().manual_seed(m * 1000 + n * 10 + k)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    ref, kw = a.double() @ b.double(), {}
    if epi == "bias_relu":
        bias = torch.randn(n, generator=g)
        kw, ref = dict(bias=bias, activation="relu"), torch.relu(ref + bias.double())
    elif epi == "residual":
        res = torch.randn(m, n, generator=g)
        kw, ref = dict(residual=res), ref + res.double()
    out = gemmtune.matmul(a, b, choice=f"pad+{family}:BM16-BN16-BK16-S2-W4-G8", **kw)
    assert _rel(out, ref) < TOL[torch.float32], (family, shape, epi)
    (_, b_strides), = seen
    assert b_strides[0] == 1, b_strides  # K-major, as Problem.padded() says


# Checked, no defect: a Conv1D weight (x @ W, W [in, out]) cached K-major, across in-place updates and precision switches
def test_a_weights_kmajor_copy_follows_updates_and_precision_switches(monkeypatch):
    from gemmtune.kernels import triton_mm

    seen = _spy(monkeypatch, triton_mm)
    padcache.WEIGHTS.clear()
    g = torch.Generator().manual_seed(11)
    w = torch.nn.Parameter(torch.randn(13, 7, generator=g))  # [in, out]: a row-major B, both sizes odd
    x = torch.randn(5, 13, generator=g)
    with torch.no_grad():
        for mode, kmajor in (("tf32x3", True), ("tf32x3", True), ("ieee", False), ("tf32x3", True)):
            _mode(monkeypatch, mode)
            seen.clear()
            out = gemmtune.matmul(x, w, choice="pad+triton_mm:BM16-BN16-BK16-S2-W4-G8")
            assert _rel(out, x.double() @ w.double()) < TOL[torch.float32], mode
            assert (seen[0][1][0] == 1) is kmajor, (mode, seen)
            w.mul_(-1.5)  # an in-place update: the next call must not be served the old copy
    padcache.WEIGHTS.clear()


# Checked, no defect: a bmm's pad+ copies and IEEE's stay row-major, and fp16 is untouched
@pytest.mark.parametrize("case", ["bmm_x3", "mm_ieee", "mm_fp16"])
def test_bmm_ieee_and_16_bit_pad_copies_stay_row_major(monkeypatch, case):
    from gemmtune.kernels import triton_mm

    _mode(monkeypatch, "ieee" if case == "mm_ieee" else "tf32x3")
    dt = torch.float16 if case == "mm_fp16" else torch.float32
    g = torch.Generator().manual_seed(len(case))
    lead = (3,) if case == "bmm_x3" else ()
    a = torch.randn(*lead, 7, 13, generator=g).to(dt)
    b = torch.randn(*lead, 13, 9, generator=g).to(dt)
    seen = _spy(monkeypatch, triton_mm) if case != "bmm_x3" else []
    out = gemmtune.matmul(a, b, choice="pad+triton_mm:BM16-BN16-BK16-S2-W4-G8")
    assert _rel(out, a.double() @ b.double()) < TOL[dt], case
    if seen:
        assert seen[0][1][-1] == 1, seen  # B row-major
    p = gemmtune.problem.Problem.from_tensors(a, b)
    assert p.padded().layout_b == "row"
