"""The tiled kernel's two K-loop forms with one K-slice (INDEXED_K): offsets carried from block
to block, or recomputed from the block index as Inductor's template does (with K a constant in
_tiled_mm_static the trip count is one too). Both against fp64 on fresh random operands: M = 1,
primes, ragged K (not a multiple of BLOCK_K), transposed operands, offset views, the static
variant and a fused epilogue; and that the index form is only taken with one K-slice."""

from __future__ import annotations

import pytest
import torch

from gemmtune.epilogue import bind
from gemmtune.kernels import launch_args, tiled

KW = dict(block_m=16, block_n=32, block_k=16, group_m=4, num_stages=2, num_warps=4)
DTYPES = [torch.float16, torch.float32]
SHAPES = [(1, 7, 13), (3, 37, 64), (17, 41, 131), (64, 96, 48), (31, 1, 5)]


def _operands(m, n, k, dtype, device, layout, seed):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen).to(dtype)
    b = torch.randn(k, n, generator=gen).to(dtype)
    if layout == "a_t":  # A column-major
        a = a.t().contiguous().t()
    elif layout == "b_t":  # B as W.T of a row-major [N, K] weight (the Linear case)
        b = b.t().contiguous().t()
    elif layout == "offset":  # views that start inside a larger buffer, rows padded
        big_a = torch.randn(m + 2, k + 3, generator=gen).to(dtype)
        big_a[1:m + 1, 2:k + 2] = a
        a = big_a[1:m + 1, 2:k + 2]
        big_b = torch.randn(k + 1, n + 5, generator=gen).to(dtype)
        big_b[1:, 3:n + 3] = b
        b = big_b[1:, 3:n + 3]
    return a.to(device), b.to(device)


def _tol(dtype):
    return 2e-2 if dtype == torch.float16 else 1e-4


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("layout", ["rm", "a_t", "b_t", "offset"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("static", [False, True], ids=["dyn", "static"])
def test_indexed_k_loop_matches_fp64(shape, layout, dtype, static, device):
    m, n, k = shape
    a, b = _operands(m, n, k, dtype, device, layout, m * 1000 + n * 10 + k)
    want = a.double() @ b.double()
    for indexed in (False, True):
        c = torch.full((m, n), float("nan"), dtype=dtype, device=device)
        tiled.launch_tiled(a, b, c, **KW, k_per_split=k, static=static, indexed_k=indexed)
        torch.testing.assert_close(c.double(), want, rtol=_tol(dtype), atol=_tol(dtype) * max(1, k ** 0.5))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
def test_indexed_k_loop_with_a_fused_epilogue(dtype, device):
    m, n, k = 19, 40, 77
    a, b = _operands(m, n, k, dtype, device, "rm", 7)
    gen = torch.Generator().manual_seed(8)
    bias = torch.randn(n, generator=gen).to(dtype).to(device)
    res = torch.randn(m, n, generator=gen).to(dtype).to(device)
    epi = bind(m, n, dtype, a.device, bias=bias, activation="relu", residual=res)
    c = torch.empty(m, n, dtype=dtype, device=device)
    tiled.launch_tiled(a, b, c, **KW, k_per_split=k, epilogue=epi, indexed_k=True)
    want = torch.relu(a.double() @ b.double() + bias.double()) + res.double()
    torch.testing.assert_close(c.double(), want, rtol=_tol(dtype), atol=_tol(dtype) * 10)


def test_indexed_k_only_with_one_k_slice():
    a, b = torch.empty(32, 200, dtype=torch.float16), torch.empty(200, 64, dtype=torch.float16)
    c = torch.empty(32, 64, dtype=torch.float16)
    kw = {k: v for k, v in KW.items() if k not in ("num_stages", "num_warps")}
    _, _, one = tiled._tiled_args(a, b, c, **kw, k_per_split=200, indexed_k=True)
    _, _, split = tiled._tiled_args(a, b, c, **kw, k_per_split=64, split_mode=1, indexed_k=True,
                                    ws=torch.empty(4, 32, 64), locks=torch.zeros(2, dtype=torch.int32))
    _, _, default = tiled._tiled_args(a, b, c, **kw, k_per_split=200)
    assert one["INDEXED_K"] is True
    assert split["INDEXED_K"] is False  # a K-slice that starts past 0 keeps the carried form
    assert default["INDEXED_K"] is tiled.INDEXED_K_DEFAULT


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("layout", ["rm", "a_t", "offset"])
@pytest.mark.parametrize("static", [False, True], ids=["dyn", "static"])
def test_odd_n_wrapped_with_its_contiguity_stated(layout, dtype, static, device, monkeypatch):
    """An odd N along a row-major B wrapped rather than masked (launch_args.MASK_ODD_N off): the
    kernel states BLOCK_N contiguity on the wrapped columns so that Triton lays the tile out along
    them; the values must be those of fp64, in both K-loop forms, with N smaller and larger than
    its block (and an odd M along a column-major A, wrapped as before)."""
    monkeypatch.setattr(launch_args, "MASK_ODD_N", False)
    for m, n, k in ((17, 41, 131), (45, 13, 64)):
        a, b = _operands(m, n, k, dtype, device, layout, m * 7 + n)
        consts = tiled._tiled_args(a, b, torch.empty(m, n, dtype=dtype), **{
            x: v for x, v in KW.items() if x not in ("num_stages", "num_warps")}, k_per_split=k)[2]
        if layout == "rm":
            assert consts["MASK_N"] is False  # wrapped, even where N < BLOCK_N (B's contiguous dim)
        want = a.double() @ b.double()
        for indexed in (False, True):
            c = torch.full((m, n), float("nan"), dtype=dtype, device=device)
            tiled.launch_tiled(a, b, c, **KW, k_per_split=k, static=static, indexed_k=indexed)
            torch.testing.assert_close(c.double(), want, rtol=_tol(dtype), atol=_tol(dtype) * max(1, k ** 0.5))
