"""The tiled kernel's output-store hint (C_LEAD_DIV / R_LEAD_DIV, launch_args.store_divisor):
what the host promises about the output's (and the residual's) row stride and N, that a
different promise is a different compiled kernel, and end to end against fp64 on outputs whose
leading stride is a multiple of 8 but not 16, of 2 only, or odd (padded-then-sliced views,
storage offsets, M = 1, primes, ragged K; plain, split-K modes 1 and 2, a fused residual, bmm,
the static variant). The interpreter does not vectorise: these check that the rounded-down
store mask and the stated multiples change no result and write nothing outside the view."""

from __future__ import annotations

import inspect

import pytest
import torch
import triton.language as tl

from gemmtune.epilogue import bind
from gemmtune.kernels import tiled
from gemmtune.kernels.launch_args import store_divisor

KW = dict(block_m=16, block_n=32, block_k=16, group_m=4, num_stages=2, num_warps=4)


def _padded(rows: int, cols: int, ld: int, dtype, device, offset: int = 0, batch: int | None = None):
    """A (rows, cols) view with row stride ``ld`` starting ``offset`` elements into a NaN buffer
    (3-D with a batch stride of rows * ld + 8 when ``batch``), and the buffer itself."""
    if batch is None:
        buf = torch.full((offset + rows * ld,), float("nan"), dtype=dtype, device=device)
        return buf[offset:].as_strided((rows, cols), (ld, 1)), buf
    bstride = rows * ld + 8
    buf = torch.full((offset + batch * bstride,), float("nan"), dtype=dtype, device=device)
    return buf[offset:].as_strided((batch, rows, cols), (bstride, ld, 1)), buf


def _untouched(buf: torch.Tensor, view: torch.Tensor) -> bool:
    """Everything in ``buf`` outside ``view`` is still NaN."""
    inside = torch.zeros(buf.numel(), dtype=torch.bool, device=buf.device)
    idx = torch.arange(buf.numel(), device=buf.device).as_strided(view.shape, view.stride(),
                                                                   view.storage_offset() - buf.storage_offset())
    inside[idx.reshape(-1)] = True
    return bool(buf[~inside].isnan().all())


def _check(c: torch.Tensor, want: torch.Tensor, dtype):
    tol = 2e-2 if dtype == torch.float16 else 1e-4
    torch.testing.assert_close(c.double(), want, rtol=tol, atol=tol)


def test_store_divisor():
    h, f = torch.float16, torch.float32
    assert store_divisor(torch.empty(7, 1000, dtype=h), 1000) == 8       # 2000 B rows: 16-byte stores
    assert store_divisor(torch.empty(7, 1000, dtype=f), 1000) == 4       # capped at 16 bytes
    assert store_divisor(torch.empty(7, 1000, dtype=torch.bfloat16), 1000) == 8
    assert store_divisor(torch.empty(7, 1004, dtype=h), 1004) == 4
    assert store_divisor(torch.empty(7, 1002, dtype=h), 1002) == 2
    assert store_divisor(torch.empty(7, 1001, dtype=h), 1001) == 1
    # Multiples of 16 elements: Triton's own specialisation sees them, nothing to add.
    assert store_divisor(torch.empty(7, 1024, dtype=h), 1024) == 1
    # A padded output: stride 1024, N = 1000: both multiples of 8.
    assert store_divisor(torch.empty(7, 1024, dtype=h)[:, :1000], 1000) == 8
    # ... N odd: the mask is not constant over 8 columns, however aligned the rows.
    assert store_divisor(torch.empty(7, 1024, dtype=h)[:, :1001], 1001) == 1
    # A storage offset of 2 bytes: no 16-byte alignment to promise.
    assert store_divisor(torch.empty(7, 1001, dtype=h)[:, 1:], 1000) == 1
    # Rows not unit-stride (a column-major output): 1.
    assert store_divisor(torch.empty(1000, 7, dtype=h).t(), 1000) == 1
    # M = 1 and a broadcast residual (row stride 0) still count their N.
    assert store_divisor(torch.empty(1, 40, dtype=h), 40) == 8
    assert store_divisor(torch.empty(40, dtype=h).expand(5, 40), 40) == 8


def test_divisor_is_part_of_the_compile_key():
    """Outputs whose leading strides promise different multiples get different constexprs (so
    Triton compiles, and keys, a kernel per promise); the same promise shares one."""
    a = torch.randn(24, 64, dtype=torch.float16)
    b = torch.randn(64, 40, dtype=torch.float16)
    kw = dict(block_m=16, block_n=32, block_k=16, group_m=4, k_per_split=64)

    def consts(c):
        return tiled._tiled_args(a, b, c, **kw)[2]

    by8 = consts(_padded(24, 40, 40, torch.float16, "cpu")[0])
    by2 = consts(_padded(24, 40, 42, torch.float16, "cpu")[0])
    odd = consts(_padded(24, 40, 41, torch.float16, "cpu")[0])
    by8b = consts(_padded(24, 40, 56, torch.float16, "cpu")[0])
    assert (by8["C_LEAD_DIV"], by2["C_LEAD_DIV"], odd["C_LEAD_DIV"]) == (8, 2, 1)
    assert by8 != by2 != odd and by8 == by8b
    # Constexprs of the kernel (and of the static one), so they are in Triton's specialisation key.
    for fn in (tiled._tiled_mm_kernel, tiled._tiled_mm_static):
        params = inspect.signature(fn.fn).parameters
        assert all(params[x].annotation in (tl.constexpr, "tl.constexpr") for x in ("C_LEAD_DIV", "R_LEAD_DIV"))
    # The residual's promise too; and a prepared launch's epilogue key tells its strides and
    # alignment apart (what R_LEAD_DIV is computed from).
    c = torch.empty(24, 40, dtype=torch.float16)
    r8 = _padded(24, 40, 48, torch.float16, "cpu")[0]
    r1 = _padded(24, 40, 47, torch.float16, "cpu")[0]
    e8 = bind(24, 40, torch.float16, torch.device("cpu"), residual=r8)
    e1 = bind(24, 40, torch.float16, torch.device("cpu"), residual=r1)
    assert tiled._tiled_args(a, b, c, epilogue=e8, **kw)[2]["R_LEAD_DIV"] == 8
    assert tiled._tiled_args(a, b, c, epilogue=e1, **kw)[2]["R_LEAD_DIV"] == 1
    assert tiled.epilogue_key(e8) != tiled.epilogue_key(e1)


# (M, N, K, row stride of C, storage offset of C): strides a multiple of 8 not 16, of 2 only, odd;
# M = 1, primes, ragged K (K not a multiple of BLOCK_K = 16), offsets aligned and not.
CASES = [
    (24, 40, 40, 40, 0),     # contiguous, 8 | 40
    (37, 24, 53, 56, 8),     # padded rows (56), 16-byte offset, prime M, ragged K
    (1, 40, 29, 40, 0),      # M = 1
    (13, 38, 31, 42, 0),     # stride and N multiples of 2 only
    (29, 31, 37, 31, 0),     # odd: primes everywhere
    (17, 40, 33, 41, 0),     # N a multiple of 8, odd stride
    (19, 40, 45, 48, 1),     # aligned stride, unaligned storage offset
    (5, 72, 16, 88, 0),      # two column tiles, the last one partial (72 = 2 x 32 + 8)
    (9, 37, 20, 48, 0),      # aligned stride, odd N: the mask's N must not be rounded
]
CID = ["x".join(map(str, c)) for c in CASES]
DTYPES = [pytest.param(torch.float16, id="fp16"), pytest.param(torch.float32, id="fp32")]


def _operands(m, n, k, dtype, device, seed):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen, dtype=torch.float32).to(dtype).to(device)
    b = torch.randn(k, n, generator=gen, dtype=torch.float32).to(dtype).to(device)
    return a, b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=CID)
@pytest.mark.parametrize("mode", ["plain", "static", "split1", "split2"])
def test_strided_output_against_fp64(case, mode, dtype, device):
    m, n, k, ld, off = case
    a, b = _operands(m, n, k, dtype, device, m * 131 + n * 7 + k + ld)
    c, buf = _padded(m, n, ld, dtype, device, off)
    kw = dict(KW, k_per_split=k)
    if mode == "static":
        kw["static"] = True
    elif mode.startswith("split"):
        per = 16
        splits, tiles = -(-k // per), -(-m // KW["block_m"]) * -(-n // KW["block_n"])
        det = mode == "split1"
        numel = tiles * KW["block_m"] * KW["block_n"] * (splits if det else 1)
        kw.update(k_per_split=per, split_mode=1 if det else 2,
                  ws=torch.zeros(numel, dtype=torch.float32, device=device),
                  locks=torch.zeros(tiles, dtype=torch.int32, device=device))
    consts = tiled._tiled_args(a, b, c, **{x: v for x, v in kw.items()
                                          if x not in ("num_stages", "num_warps", "static")})[2]
    assert consts["C_LEAD_DIV"] == store_divisor(c, n)
    tiled.launch_tiled(a, b, c, **kw)
    _check(c, a.double() @ b.double(), dtype)
    assert _untouched(buf, c)


def test_cases_cover_every_divisor_class():
    got = {(store_divisor(_padded(m, n, ld, d, "cpu", off)[0], n), d)
           for m, n, k, ld, off in CASES for d in (torch.float16, torch.float32)}
    assert {(8, torch.float16), (4, torch.float32), (2, torch.float16), (2, torch.float32),
            (1, torch.float16), (1, torch.float32)} <= got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("res_ld", [40, 42, 41, 48], ids=lambda x: f"res{x}")
@pytest.mark.parametrize("c_ld", [40, 42, 41], ids=lambda x: f"c{x}")
def test_residual_and_output_strides(c_ld, res_ld, dtype, device):
    """The fused epilogue's residual read with its own promise (R_LEAD_DIV), larger, smaller or
    equal to the output's; the mask is rounded to the larger, both must hold."""
    m, n, k = 23, 40, 35
    a, b = _operands(m, n, k, dtype, device, c_ld * 100 + res_ld)
    gen = torch.Generator().manual_seed(res_ld)
    res, _ = _padded(m, n, res_ld, dtype, device)
    res.copy_(torch.randn(m, n, generator=gen).to(dtype))
    bias = torch.randn(n, generator=gen).to(dtype).to(device)
    c, buf = _padded(m, n, c_ld, dtype, device)
    epi = bind(m, n, dtype, torch.device(device), bias=bias, activation="relu", residual=res)
    consts = tiled._tiled_args(a, b, c, block_m=16, block_n=32, block_k=16, group_m=4, k_per_split=k,
                               epilogue=epi)[2]
    assert (consts["C_LEAD_DIV"], consts["R_LEAD_DIV"]) == (store_divisor(c, n), store_divisor(res, n))
    tiled.launch_tiled(a, b, c, k_per_split=k, epilogue=epi, **KW)
    want = (a.double() @ b.double() + bias.double()).relu() + res.double()
    _check(c, want, dtype)
    assert _untouched(buf, c)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ld", [40, 42, 41], ids=lambda x: f"ld{x}")
def test_bmm_strided_output(ld, dtype, device):
    batch, m, n, k = 3, 11, 40, 27
    gen = torch.Generator().manual_seed(ld)
    a = torch.randn(batch, m, k, generator=gen).to(dtype).to(device)
    b = torch.randn(batch, k, n, generator=gen).to(dtype).to(device)
    c, buf = _padded(m, n, ld, dtype, device, batch=batch)
    tiled.launch_tiled(a, b, c, k_per_split=k, **KW)
    _check(c, a.double() @ b.double(), dtype)
    assert _untouched(buf, c)
