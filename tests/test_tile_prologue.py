"""The tiled kernel's prologue (kernels.tiled): the divisors the host computes for it
(launch_args.udiv_consts, tile_order_args), the grouped tile order and the edge folding built on
them, checked against the plain Python arithmetic they replace, on odd shapes (M = 1, primes,
one tile, a short last group), and end to end against fp64 where rows and columns fold."""

from __future__ import annotations

import random

import pytest
import torch
import triton
import triton.language as tl

from gemmtune.kernels import tiled
from gemmtune.kernels.launch_args import tile_order_args, udiv_consts
from gemmtune.verify import compare


def _host_div(n: int, d: int) -> int:
    mul, shr = udiv_consts(d)
    assert 2**31 <= mul < 2**32  # one argument type for every divisor (see udiv_consts)
    return (n * mul) >> (31 + shr)


def test_udiv_consts_is_exact():
    for d in range(1, 300):
        for n in [*range(0, 1200), *range(2**31 - 600, 2**31)]:
            assert _host_div(n, d) == n // d, (n, d)
    rng = random.Random(0)
    for _ in range(20000):
        d = rng.choice([rng.randrange(1, 2**31), rng.randrange(1, 2**12), 2 ** rng.randrange(31),
                        2 ** rng.randrange(1, 31) + rng.choice([-1, 1])])
        q = rng.randrange(0, (2**31 - 1) // d + 1)
        for n in {q * d, q * d + d - 1, max(q * d - 1, 0), rng.randrange(2**31), 2**31 - 1}:
            if n < 2**31:
                assert _host_div(n, d) == n // d, (n, d)
    with pytest.raises(ValueError):
        udiv_consts(0)
    with pytest.raises(ValueError):
        udiv_consts(2**31)


@triton.jit
def _udiv_probe(n_ptr, out_ptr, mul, shr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tiled._udiv(tl.load(n_ptr + offs), mul, shr))


@pytest.mark.parametrize("d", [1, 2, 3, 7, 8, 24, 1000, 65537, 2**30 + 3, 2**31 - 1])
def test_kernel_udiv_matches_floor_division(d, device):
    vals = [0, 1, d - 1, d, d + 1, 3 * d - 1, 7 * d, 2**31 - 1, 2**31 - 2, 12345, 999999, 2**24 + 1, 2**30]
    vals = [v for v in vals if v < 2**31]
    n = torch.tensor(vals + [17] * (16 - len(vals)), dtype=torch.int32, device=device)
    out = torch.empty_like(n)
    _udiv_probe[(1,)](n, out, *udiv_consts(d), BLOCK=16)
    assert out.tolist() == [v // d for v in n.tolist()]


@triton.jit
def _order_probe(out_ptr, M, N, width_mul, width_shr, last_mul, last_shr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = tiled._grouped_tile(pid, M, N, width_mul, width_shr, last_mul, last_shr,
                                       BLOCK_M, BLOCK_N, GROUP_M)
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, pid_n)


def _reference_order(M, N, bm, bn, g):
    """The grouped order as the kernel computed it before the host did its divisions."""
    grid_m, grid_n = triton.cdiv(M, bm), triton.cdiv(N, bn)
    width = g * grid_n
    out = []
    for pid in range(grid_m * grid_n):
        group_id = pid // width
        group_size = min(grid_m - group_id * g, g)
        out.append((group_id * g + (pid % width) % group_size, (pid % width) // group_size))
    return out


@pytest.mark.parametrize("M,N,bm,bn,g", [
    (1, 1, 16, 16, 8), (1, 4099, 16, 32, 8), (97, 31, 16, 16, 8), (127, 509, 16, 32, 4),
    (257, 67, 32, 16, 8), (1000, 1000, 64, 128, 8), (333, 4097, 64, 128, 8), (50, 200, 16, 16, 1),
    (200, 48, 16, 16, 3), (4096, 16, 64, 16, 8), (16, 4096, 16, 64, 8)])
def test_grouped_order_matches_the_division_it_replaces(M, N, bm, bn, g, device):
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    out = torch.full((tiles, 2), -1, dtype=torch.int32, device=device)
    _order_probe[(tiles,)](out, M, N, *tile_order_args(M, N, bm, bn, g), BLOCK_M=bm, BLOCK_N=bn, GROUP_M=g)
    got = [tuple(t) for t in out.tolist()]
    assert got == _reference_order(M, N, bm, bn, g)
    assert len(set(got)) == tiles  # every tile once


def test_tile_order_args_are_the_group_divisors():
    for M, N, bm, bn, g in [(1, 1, 16, 16, 8), (1000, 1000, 64, 128, 8), (200, 48, 16, 16, 3), (64, 64, 64, 64, 8)]:
        grid_m, grid_n = triton.cdiv(M, bm), triton.cdiv(N, bn)
        wm, ws, lm, ls = tile_order_args(M, N, bm, bn, g)
        assert (wm, ws) == udiv_consts(g * grid_n)
        assert (lm, ls) == udiv_consts(grid_m - (grid_m - 1) // g * g)  # rows of the last group


@triton.jit
def _edge_probe(out_ptr, start, size, BLOCK: tl.constexpr, DIV: tl.constexpr):
    r = start + tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.arange(0, BLOCK), tiled._edge_rows(r, size, DIV))


@pytest.mark.parametrize("size,div,block", [(1, 1, 16), (24, 8, 64), (1000, 8, 128), (40, 4, 32), (17, 1, 16),
                                            (16, 16, 16), (96, 16, 64)])
def test_edge_rows_stay_inside_and_keep_vector_groups(size, div, block, device):
    for start in range(0, size, block):
        out = torch.empty(block, dtype=torch.int32, device=device)
        _edge_probe[(1,)](out, start, size, BLOCK=block, DIV=div)
        got = out.tolist()
        for i, v in enumerate(got):
            r = start + i
            assert 0 <= v < size
            if r < size:
                assert v == r
        # aligned groups of DIV stay contiguous and DIV-aligned (what the kernel tells Triton)
        for i in range(0, block, div):
            assert got[i] % div == 0 and got[i:i + div] == list(range(got[i], got[i] + div))


@pytest.mark.parametrize("shape", [(1, 24, 40), (24, 40, 17), (29, 31, 37), (61, 130, 45), (3, 1000, 64)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layouts", [("col", "row"), ("row", "col"), ("row", "row")], ids=lambda ls: "-".join(ls))
@pytest.mark.parametrize("edge", ["wrap", "auto"])
def test_folded_edges_give_the_product(shape, layouts, edge, device):
    """Rows and columns past the edge fold (edge='wrap' forces it even where M or N is smaller
    than the block: a column-major A with M = 24 < 64 folds 40 rows into its last 8-row group)."""
    m, n, k = shape
    gen = torch.Generator().manual_seed(m * 1000 + n + k)
    a = torch.randn(m, k, generator=gen, dtype=torch.float32)
    b = torch.randn(k, n, generator=gen, dtype=torch.float32)
    a = (a.t().contiguous().t() if layouts[0] == "col" else a).to(device)
    b = (b.t().contiguous().t() if layouts[1] == "col" else b).to(device)
    c = torch.full((m, n), float("nan"), device=device)
    tiled.launch_tiled(a, b, c, block_m=64, block_n=32, block_k=16, group_m=8, num_stages=2, num_warps=4,
                       k_per_split=k, edge=edge)
    res = compare(c, torch.mm(a.double(), b.double()), 1e-5)
    assert res.ok, res.reason
