"""Epilogue corner cases and workspace reuse found by session 45's CPU hunt (aliasing / epilogues).

Each failed on the code it was written against:

* relu in the Triton epilogue (tile_epilogue.activation, ``tl.maximum(x, 0.0)``) turns a NaN
  pre-activation into 0, where torch.relu (and gemmtune's own aten family) keeps the NaN.
* the aten family applies the residual in the output's 16-bit dtype: an a @ b past fp16's range
  that the residual brings back gives inf, where every Triton family gives the finite fp32
  result. That is torch's own eager composition; the README claimed fp32 for every family and
  now says so (the test pins the documented difference).
* a split-K launch that stops part way (an exception inside the grid: Ctrl-C in the CPU
  interpreter) leaves its arrival counters and atomic partials in the caller's SplitKWorkspace,
  and the next call through that workspace is silently wrong.

CPU: the Triton interpreter (conftest sets TRITON_INTERPRET=1), fp32/fp16, small sizes.
"""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune.epilogue import reference
from gemmtune.kernels import tiled
from gemmtune.kernels.splitk import SplitKWorkspace

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning",
                                        "ignore:invalid value encountered:RuntimeWarning")

NAN_CHOICES = [
    "triton_mm:BM16-BN16-BK16-S1-W4-G8",
    "splitk:BM16-BN16-BK16-S1-W4-G8-SK2-atomic",
    "decompose_k:s2",                                   # the epilogue in its sum kernel
    "skinny:BM16-BN16-BK16-SK1-S1-W4-dot-atomic-P3",    # stream-K
]


@pytest.mark.parametrize("choice", NAN_CHOICES)
def test_relu_keeps_nan_like_torch(choice):
    """relu(NaN) is NaN in torch; a NaN in one row of A makes that whole output row NaN."""
    torch.manual_seed(0)
    a, b = torch.randn(4, 32), torch.randn(32, 16)
    a[0, 0] = float("nan")
    bias = torch.randn(16)
    out = gemmtune.matmul(a, b, choice=choice, bias=bias, activation="relu")
    want = torch.relu(a.double() @ b.double() + bias.double())
    assert torch.isnan(want[0]).all()
    assert torch.equal(torch.isnan(out), torch.isnan(want)), (
        f"{choice}: relu turned NaN into {out[0, :4].tolist()} (torch: NaN)")
    # and gemmtune's own aten family agrees with torch already
    assert torch.isnan(gemmtune.matmul(a, b, choice="aten", bias=bias, activation="relu")[0]).all()


def test_aten_applies_the_residual_on_the_rounded_output_as_documented():
    """fp16: a @ b = 70400 (past fp16's 65504), residual -20000: the epilogue in fp32 gives 50400,
    as triton_mm does; aten stores the product to fp16 first (inf) and then adds the residual, as
    torch's ``mm(a, b) + res`` does (README, kernels.aten.run)."""
    a = torch.full((4, 16), 16.0, dtype=torch.float16)
    b = torch.full((16, 16), 275.0, dtype=torch.float16)
    res = torch.full((4, 16), -20000.0, dtype=torch.float16)
    want = reference(a.double() @ b.double(), residual=res.double())  # 50400, fits fp16
    tiled_out = gemmtune.matmul(a, b, choice="triton_mm:BM16-BN16-BK16-S1-W4-G8", residual=res)
    torch.testing.assert_close(tiled_out.double(), want)
    out = gemmtune.matmul(a, b, choice="aten", residual=res)
    torch.testing.assert_close(out, torch.mm(a, b) + res)  # torch's composition: inf


def test_workspace_is_right_after_an_interrupted_split_k_call(monkeypatch):
    """An exception inside the grid (simulated at the third program's store: in the interpreter
    a KeyboardInterrupt lands there just the same) leaves the tile's arrival counter at 2 and its
    atomic partials in the workspace. The next call through the same workspace (a dispatcher
    keeps one for its lifetime) must still be right."""
    torch.manual_seed(0)
    ws = SplitKWorkspace()
    choice = "splitk:BM16-BN16-BK16-S1-W4-G8-SK4-atomic"
    a, b = torch.randn(16, 64), torch.randn(64, 16)
    original, calls = tiled.split_epilogue, [0]

    def interrupted(*args, **kw):
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return original(*args, **kw)

    monkeypatch.setattr(tiled, "split_epilogue", interrupted)
    with pytest.raises(BaseException):
        gemmtune.matmul(a, b, choice=choice, workspace=ws)
    monkeypatch.setattr(tiled, "split_epilogue", original)
    out = gemmtune.matmul(a, b, choice=choice, workspace=ws)
    torch.testing.assert_close(out.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-4)
