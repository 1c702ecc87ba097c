"""The skinny (decode) family against fp64: M = 1..64, odd N and K, both layouts of B,
transposed and offset views, split-K in both reduction modes, and its config space.

CPU: the Triton interpreter (fp16/fp32; conftest sets it up). GPU: the same tests, plus
bf16 and decode-sized problems (test_skinny_gpu_*; skipped without CUDA).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.configs import Choice, SkinnyConfig
from gemmtune.device import DeviceInfo
from gemmtune.kernels import skinny
from gemmtune.kernels.splitk import SplitKWorkspace
from gemmtune.problem import Problem
from gemmtune.verify import compare

from conftest import covering

# Relative Frobenius error by input dtype (fp32 accumulation everywhere): fp32 inputs use
# exact fp32 products (input_precision ieee) and sit near 1e-7; 16-bit outputs are
# dominated by their own rounding (rms ~2e-4 for fp16, ~2e-3 for bf16).
TOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}
ON_GPU = torch.cuda.is_available()

# Both inner products, split and unsplit, both reduction modes; BLOCK_K > some K below.
CONFIGS = [
    SkinnyConfig(1, 16, 64, 1, 1, 4, False, True),
    SkinnyConfig(4, 32, 64, 3, 1, 4, False, True),
    SkinnyConfig(4, 32, 64, 3, 1, 4, False, False),
    SkinnyConfig(16, 16, 64, 1, 1, 2, False, True),
    SkinnyConfig(16, 16, 32, 2, 2, 4, True, True),
    SkinnyConfig(16, 32, 64, 4, 3, 4, True, False),
    # stream-K: 7 programs share strips x K-blocks unevenly (runs cross strip boundaries)
    SkinnyConfig(16, 16, 32, 1, 2, 4, True, False, 7),
    # GEMV strips (skinny_spec._DEFAULT_GEMV): 2 and 4 columns a program, BLOCK_K past most K here
    SkinnyConfig(1, 2, 128, 1, 1, 4, False, True),
    SkinnyConfig(4, 4, 64, 1, 1, 2, False, True),
    # the PDL path: its first K step peeled (the B tile loaded before the wait); the interpreter
    # runs that arithmetic without the wait. BLOCK_K past some K below: the peeled tile is masked.
    SkinnyConfig(1, 2, 128, 1, 1, 4, False, True, pdl=True),
    SkinnyConfig(8, 4, 64, 1, 1, 2, False, True, pdl=True),
    SkinnyConfig(16, 16, 32, 1, 1, 4, True, True, pdl=True),  # tl.dot's peel (batched decode)
    # the one-row 2-D path (-flat), alone and peeled
    SkinnyConfig(1, 4, 128, 1, 1, 2, False, True, flat=True),
    SkinnyConfig(1, 2, 64, 1, 1, 4, False, True, pdl=True, flat=True),
    # -flat-sum: the tile summed over K at every step, alone and peeled; over 4 and 8 rows a program
    SkinnyConfig(1, 4, 128, 1, 1, 2, False, True, flat=True, sum_each=True),
    SkinnyConfig(1, 2, 64, 1, 1, 4, False, True, pdl=True, flat=True, sum_each=True),
    SkinnyConfig(4, 4, 128, 1, 1, 2, False, True, flat=True, sum_each=True),
    SkinnyConfig(8, 2, 64, 1, 1, 4, False, True, pdl=True, flat=True, sum_each=True),
    SkinnyConfig(4, 4, 64, 3, 1, 2, False, False, flat=True, sum_each=True),  # over rows, K split 3 ways
]
# (M, N, K): M = 1, a prime M, M = BLOCK_M, odd N, K not a multiple of BLOCK_K, K < BLOCK_K.
# K = 232 (was 1000, then 488; each 256 less, a multiple of every BLOCK_K here): the same remainder
# for every BLOCK_K (104, 40, 8 of 128, 64, 32), the same power-of-two divisor (8), an uneven last
# slice of each split (128 + 104 two ways, 3 x 64 + 40 four ways), and at N = 100 stream-K's 7
# programs still take one whole strip each (8 K-blocks a program, was 16); half the K steps again,
# for the 8-row -flat-sum -pdl strip (BN2) ~12 s a case in the interpreter at 488.
# K = 172 at M = 1 (was 300) and 129 at M = 3 (was 257): K past 128 with the same remainder for
# every BLOCK_K (44, 44, 12 and 1, 1, 1 of 128, 64, 32), the same power-of-two divisor (4 and 1), the
# same grids, every split's slices as uneven (3-way: 64 + 64 + 44 and 64 + 64 + 1, the one-element last
# slice kept) and stream-K's programs crossing strips (2.6 and 2.9 K-blocks a program): half the K steps.
SHAPES = [(1, 37, 172), (3, 64, 129), (16, 33, 512), (5, 100, 232), (2, 7, 40)]


def _fits(cfg: SkinnyConfig, m: int) -> bool:
    return cfg.block_m >= m


def check(out, a, b):
    ref = torch.mm(a.double(), b.double())
    res = compare(out, ref, TOL[a.dtype])
    assert res.ok, f"{tuple(a.shape)}x{tuple(b.shape)} {a.dtype}: {res.reason}"


def run(cfg, a, b, workspace=None):
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=a.dtype, device=a.device)
    skinny.run(a, b, out, cfg, workspace=workspace)
    return out


DTYPES = [pytest.param(torch.float16, id="fp16"), pytest.param(torch.float32, id="fp32"),
          pytest.param(torch.bfloat16, id="bf16")]


# Every config x shape in the fast lane, with one (layout, dtype) of six each, rotating; the rest is slow.
@pytest.mark.parametrize("cfg,shape,layout_b,dtype", covering((CONFIGS, lambda c: c.id),
                                                              (SHAPES, lambda s: "x".join(map(str, s))),
                                                              ["row", "col"], DTYPES))
def test_matches_fp64(cfg, shape, layout_b, dtype, operand):
    m, n, k = shape
    if not _fits(cfg, m):
        pytest.skip("BLOCK_M < M: the space never offers it")
    a, b = operand(m, k, "row", dtype), operand(k, n, layout_b, dtype)
    check(run(cfg, a, b), a, b)


@pytest.mark.parametrize("layouts", [("offset", "offset"), ("col", "strided"), ("strided", "col")])
@pytest.mark.parametrize("cfg", [CONFIGS[1], CONFIGS[5], CONFIGS[-3], CONFIGS[-2], CONFIGS[-1]], ids=lambda c: c.id)
def test_odd_views(cfg, layouts, operand):
    """Unaligned data pointers, transposed A, no unit stride at all."""
    m, n, k = 3, 45, 141  # K odd, ragged for every BLOCK_K (13 of 128 and 64) and in 3 K-slices (64 + 64 + 13), as 333 was
    a, b = operand(m, k, layouts[0]), operand(k, n, layouts[1])
    check(run(cfg, a, b), a, b)


def test_writes_only_its_output(operand):
    m, n, k = 5, 37, 256
    a, b = operand(m, k), operand(k, n, "col")
    big = torch.full((m + 3, n + 5), float("nan"), dtype=a.dtype, device=a.device)
    out = big[1:m + 1, 2:n + 2]
    skinny.run(a, b, out, CONFIGS[2])
    check(out, a, b)
    outside = big.clone()
    outside[1:m + 1, 2:n + 2] = 0
    assert torch.isnan(outside).sum() == big.numel() - m * n


@pytest.mark.parametrize("cfg", [CONFIGS[1], CONFIGS[4]], ids=lambda c: c.id)
def test_deterministic_split_is_bitwise_reproducible(cfg, operand):
    a, b = operand(3, 700, dtype=torch.float32), operand(700, 29, "col", dtype=torch.float32)
    ws = SplitKWorkspace()
    first, second, fresh = run(cfg, a, b, ws), run(cfg, a, b, ws), run(cfg, a, b)
    assert torch.equal(first, second) and torch.equal(first, fresh)
    check(first, a, b)


def test_workspace_left_clean_for_the_next_launch(operand):
    ws = SplitKWorkspace()
    for cfg in (CONFIGS[2], CONFIGS[5], CONFIGS[1]):
        for m, n, k in ((3, 40, 300), (1, 7, 700), (4, 64, 256)):
            a, b = operand(m, k), operand(k, n)
            check(run(SkinnyConfig(max(cfg.block_m, 4), *list(cfg.params().values())[1:]), a, b, ws), a, b)
    dev = a.device
    assert int(ws.counters(1, dev).count_nonzero()) == 0
    assert int(ws.partials(1, False, dev).count_nonzero()) == 0


def test_through_matmul_and_choice_ids(operand):
    a, b = operand(2, 96), operand(96, 40, "col")
    ch = Choice("skinny", CONFIGS[1])
    assert Choice.parse(ch.id) == ch
    assert ch.id == "skinny:BM4-BN32-BK64-SK3-S1-W4-core-det"
    check(gemmtune.matmul(a, b, choice=ch.id), a, b)
    check(gemmtune.matmul(a, b, choice="pad+" + ch.id), a, b)


def test_stream_k_runs_cross_strips_and_leave_the_workspace_clean(operand):
    ws = SplitKWorkspace()
    for progs, (m, n, k) in ((5, (1, 37, 300)), (13, (2, 50, 640)), (3, (5, 33, 130)), (40, (16, 64, 512))):
        a, b = operand(m, k), operand(k, n, "col")
        cfg = SkinnyConfig(16, 16, 32, 1, 2, 4, True, False, progs)
        for _ in range(2):
            check(run(cfg, a, b, ws), a, b)
    assert int(ws.counters(1, a.device).count_nonzero()) == 0
    assert int(ws.partials(1, False, a.device).count_nonzero()) == 0


def test_plan_is_the_launch():
    p = skinny.plan(16, 6144, 4096, SkinnyConfig(16, 64, 256, 4, 4, 4, True, True))
    assert p["grid"] == (96, 4) and p["k_per_split"] == 1024 and p["workspace_numel"] == 16 * 6144 * 4
    p = skinny.plan(3, 10, 1000, SkinnyConfig(4, 16, 64, 3, 1, 4, False, False))
    # ceil(1000/3) = 334 -> 6 blocks of 64 = 384 per slice -> 3 slices; atomic mode: one block of
    # BM x BN per tile (the workspace is tile-major), 1 tile of 4 x 16 here.
    assert p["splits"] == 3 and p["k_per_split"] == 384 and p["workspace_numel"] == 64
    p = skinny.plan(1, 6144, 4096, SkinnyConfig(16, 64, 256, 1, 4, 4, True, False, 132))
    assert p["grid"] == (132, 1) and p["units_per_program"] == 96 * 16 / 132 and p["workspace_numel"] == 96 * 16 * 64


@pytest.mark.parametrize("shape", [(1, 6144, 4096), (16, 4096, 14336), (32, 32, 28672), (64, 64, 4096)])
def test_space_is_pure_and_pruned_with_reasons(shape):
    dev = DeviceInfo.lookup("h200")
    p = Problem.from_sizes(*shape, "bf16")
    for kind in ("default", "exhaustive"):
        kept, rejected = skinny.space(p, dev, kind)
        assert kept, f"{kind} space empty at {shape}"
        assert all(skinny.constraint(c, p, dev) is None for c in kept)
        assert all(isinstance(r, str) and r for _, r in rejected)
        for c in kept:
            skinny.validate(p, c)
            assert c.block_m >= min(p.m, skinny.MAX_M)
            assert c.dot or c.block_m <= 16


@pytest.mark.parametrize("m", [2, 4, 8])
def test_default_space_keeps_cuda_core_tiles_and_fp32_dot_tiles(m):
    """The default CUDA-core tiles shrink to the register budget instead of vanishing at M = 4 and
    8 (fp32 8x5120x5120: --fast found a core BN16-BK64 kernel at 1.15x cuBLAS, the default space
    had none), and fp32's dot tiles halve BLOCK_K so that their stages fit: skinny's default fp32
    space was 1-6 configs at M >= 2 on an H100, against 25-38 at bf16."""
    dev = DeviceInfo.lookup("h100")
    for dt in ("bf16", "fp32"):
        p = Problem.from_sizes(m, 5120, 5120, dt, layout_b="col")
        kept, _ = skinny.space(p, dev, "default")
        core = [c for c in kept if not c.dot]
        assert core and all(skinny.core_regs(c) <= 64 for c in core), (dt, m)
        assert len([c for c in kept if c.dot]) >= 20, (dt, m)
    kept, _ = skinny.space(Problem.from_sizes(8, 5120, 5120, "fp32", layout_b="col"), dev, "default")
    assert any((c.block_m, c.block_n, c.block_k, c.dot) == (8, 16, 64, False) for c in kept)  # --fast's tile


def test_space_refuses_wide_m():
    p = Problem.from_sizes(128, 4096, 4096, "bf16")
    kept, rejected = skinny.space(p, DeviceInfo.lookup("h100"), "default")
    assert not kept and all("not a skinny problem" in r for _, r in rejected)


def test_validate_rejects_impossible_configs():
    p = Problem.from_sizes(4, 64, 256, "fp16")
    with pytest.raises(ValueError, match="power of two"):
        skinny.validate(p, SkinnyConfig(3, 64, 64))
    with pytest.raises(ValueError, match="tl.dot"):
        skinny.validate(p, SkinnyConfig(4, 64, 64, dot=True))
    with pytest.raises(ValueError, match="stream-K"):
        skinny.validate(p, SkinnyConfig(16, 64, 64, 1, 2, 4, True, True, 132))
    assert Choice.parse("skinny:BM16-BN64-BK256-SK1-S4-W4-dot-atomic-P132").config.stream_k == 132
    with pytest.raises(ValueError, match="malformed"):
        Choice.parse("skinny:BM4-BN32")
    # -pdl: one K-slice only (every path peels its first step; no split, no stream-K)
    for bad in (SkinnyConfig(1, 4, 64, 2, pdl=True), SkinnyConfig(16, 64, 64, 1, 2, 4, True, False, 132, pdl=True)):
        with pytest.raises(ValueError, match="PDL path"):
            skinny.validate(p, bad)
    skinny.validate(p, SkinnyConfig(16, 16, 64, 1, 1, 4, True, True, pdl=True))


@pytest.mark.parametrize("shape", [(1, 37, 300), (3, 7, 1), (8, 64, 64), (5, 29, 232), (1, 3, 17)],
                         ids=lambda s: "x".join(map(str, s)))
def test_pdl_path_is_the_plain_strip_with_its_first_step_peeled(shape, operand):
    """A ``-pdl`` GEMV strip (first B tile loaded before the wait) against fp64, and bitwise equal
    to the same strip without it: the peeled step adds the same products in the same order. K of
    1, shorter than BLOCK_K, a multiple of it, and ragged; a K-contiguous B (the layout it reads)."""
    m, n, k = shape
    a = operand(m, k, "row", torch.float32)
    for layout in ("col", "row"):  # K-contiguous (a Linear's weight) and N-contiguous B
        b = operand(k, n, layout, torch.float32)
        for bn, bk in ((2, 128), (4, 64), (4, 16)):
            plain = SkinnyConfig(8, bn, bk, 1, 1, 2, False, True)
            got, want = run(replace(plain, pdl=True), a, b), run(plain, a, b)
            check(got, a, b)
            assert torch.equal(got, want), (layout, bn, bk)


# fp16 on every layout, fp32 on a Linear's (row, col) and on offset views: each case runs ~100
# kernels in the interpreter (~21 s on the 2-core CI machine), and the dtype changes the loads'
# conversion, not the addressing that the other layouts test.
@pytest.mark.parametrize("layouts, dtype", [
    *[(lay, torch.float16) for lay in (("row", "col"), ("row", "row"), ("offset", "offset"), ("col", "strided"),
                                      ("strided", "col"))],
    (("row", "col"), torch.float32), (("offset", "offset"), torch.float32)],
    ids=lambda v: "-".join(v) if isinstance(v, tuple) else str(v).replace("torch.float", "fp"))
def test_one_row_path_against_fp64(layouts, dtype, operand):
    """BLOCK_M = 1, the decode strips, on every layout (the 3-D product, -flat's 2-D one and
    -flat-sum, summed each step): both B layouts, offset and strided views, M = 1 and M past BLOCK_M (a program a row), K = 1, K <
    BLOCK_K, a multiple of it and ragged; K split 3 ways in both reductions; the -pdl twin's peeled
    first step bitwise the plain strip's."""
    # K = 144: ragged for every BLOCK_K here (16 past a multiple of 128, 64 and 32, as 400 was) and
    # for the 3-way split (3 slices of 64, the last 16); the interpreter's time grows with K x rows
    # x column strips, so N and M are the least that keep each case: N = 19 and 29 primes past the
    # widest strip (BN 16: a ragged second strip), N = 32 a multiple of every BN (two BN-16 strips,
    # was 64), M = 2 past BLOCK_M = 1 (a program a row, was 5).
    for m, n, k in ((1, 19, 300), (1, 3, 1), (1, 32, 256), (2, 29, 144), (1, 1, 17)):
        a, b = operand(m, k, layouts[0], dtype), operand(k, n, layouts[1], dtype)
        for cfg in (SkinnyConfig(1, 2, 128, 1, 1, 4, False, True), SkinnyConfig(1, 4, 64, 1, 1, 2, False, True),
                    SkinnyConfig(1, 16, 32, 3, 1, 4, False, True), SkinnyConfig(1, 16, 32, 3, 1, 4, False, False)):
            for flat, sum_each in ((False, False), (True, False), (True, True)):
                c = replace(cfg, flat=flat, sum_each=sum_each)
                got = run(c, a, b)
                check(got, a, b)
                if c.split_k == 1:
                    assert torch.equal(run(replace(c, pdl=True), a, b), got), (m, n, k, c.id)


def test_flat_ids_rules_and_space():
    """-flat and -flat-sum: parsed and printed (before -pdl), refused off the one-row CUDA-core path
    with the reason, and offered where they were measured (skinny_spec._DEFAULT_ONE_ROW says so)."""
    from gemmtune.kernels import skinny_spec

    for cid in ("BM1-BN4-BK1024-SK1-S1-W2-core-det-flat", "BM1-BN4-BK1024-SK1-S1-W2-core-det-flat-pdl",
                "BM1-BN4-BK1024-SK1-S1-W2-core-det-flat-sum", "BM1-BN4-BK1024-SK1-S1-W2-core-det-flat-sum-pdl"):
        assert Choice.parse("skinny:" + cid).config.id == cid
    assert Choice.parse("skinny:BM1-BN4-BK1024-SK1-S1-W2-core-det-flat-sum").config.sum_each
    c = Choice.parse("skinny:BM1-BN4-BK1024-SK1-S1-W2-core-det-flat-pdl").config
    assert c.flat and c.pdl and c.block_n == 4
    with pytest.raises(ValueError, match="skinny:BM"):
        Choice.parse("skinny:BM1-BN4-BK1024-SK1-S1-W2-core-det-pdl-flat")  # the order is fixed
    h200 = DeviceInfo.lookup("h200")
    p1 = Problem.from_sizes(1, 16384, 2048, "bf16", layout_b="col")
    for bad in (SkinnyConfig(2, 4, 512, 1, 1, 2, False, True, flat=True),
                SkinnyConfig(16, 16, 64, 1, 1, 4, True, True, flat=True),
                SkinnyConfig(16, 16, 64, 1, 1, 4, True, False, 132, flat=True),
                SkinnyConfig(1, 4, 512, 1, 1, 2, False, True, sum_each=True),  # -sum without -flat
                SkinnyConfig(16, 4, 512, 1, 1, 2, False, True, flat=True, sum_each=True)):  # past FLAT_MAX_M
        assert skinny_spec.constraint(bad, p1, h200) == skinny_spec.FLAT_MISFIT_WHY, bad.id
        with pytest.raises(ValueError, match="-flat path"):
            skinny.validate(p1, bad)
    assert skinny_spec.constraint(SkinnyConfig(1, 4, 1024, 1, 1, 2, False, True, flat=True), p1, h200) is None
    p4 = Problem.from_sizes(4, 16384, 2048, "bf16", layout_b="col")
    assert skinny_spec.constraint(SkinnyConfig(4, 2, 1024, 1, 1, 2, False, True, flat=True, sum_each=True), p4,
                                  h200) is None
    # The spaces: -flat GEMV strips at M = 1 with a K-contiguous B on 16-bit operands only (the
    # layout measured there, session 40), in place of the 3-D GEMV tiles of the default space and
    # beside them in the exhaustive one.
    # On a layer of N >= 64 SMs (p1, 16384 wide) also the 8- and 16-column strips of _WIDE_ONE_ROW;
    # on the H100 and H200 (132 SMs) from N = 8448.
    for q, tiles in ((p1, skinny_spec._DEFAULT_ONE_ROW + skinny_spec._WIDE_ONE_ROW),
                     (Problem.from_sizes(1, 8448, 2048, "bf16", layout_b="col"),
                      skinny_spec._DEFAULT_ONE_ROW + skinny_spec._WIDE_ONE_ROW),
                     (Problem.from_sizes(1, 8447, 2048, "bf16", layout_b="col"), skinny_spec._DEFAULT_ONE_ROW),
                     (Problem.from_sizes(1, 896, 4864, "fp16", layout_b="col"), skinny_spec._DEFAULT_ONE_ROW)):
        kept = skinny_spec.space(q, h200)[0]
        flat = [c for c in kept if c.flat]
        assert sorted((c.block_n, c.block_k, c.num_warps, c.sum_each) for c in flat) == sorted(
            (bn, bk, w, se) for bn, bk, w, _, se in tiles), q
        assert skinny_spec.one_row_tiles(q, h200) == tiles, q
        assert not [c for c in kept if not c.dot and c.block_n <= 4 and not c.flat], q  # no 3-D GEMV tile
        every = skinny_spec.space(q, h200, "exhaustive")[0]
        assert set(flat) <= set(every) and any(c.sum_each for c in every), q
    for q in (Problem.from_sizes(1, 16384, 2048, "bf16"), Problem.from_sizes(2, 4096, 4096, "bf16", layout_b="col"),
              Problem.from_sizes(1, 4096, 4096, "fp32", layout_b="col")):
        for kind in ("default", "exhaustive"):
            assert not [c for c in skinny_spec.space(q, h200, kind)[0] if c.flat], (q, kind)
    fp32 = skinny_spec.space(Problem.from_sizes(1, 4096, 4096, "fp32", layout_b="col"), h200)[0]
    assert [c for c in fp32 if not c.dot and c.block_n <= 4], "fp32 keeps the 3-D GEMV tiles"


@pytest.mark.parametrize("shape", [(16, 37, 300), (3, 64, 1), (20, 29, 1000)], ids=lambda s: "x".join(map(str, s)))
def test_pdl_dot_path_is_the_plain_dot_strip_with_its_first_step_peeled(shape, operand):
    """The tl.dot path's -pdl twin (M up to 64: batched decode): its first B tile before the wait,
    against fp64 and bitwise the plain dot strip, for both B layouts, fp16 (the interpreter's
    tl.dot is exact enough to compare bitwise; bf16 is wrong there)."""
    m, n, k = shape
    a = operand(m, k, "row", torch.float16)
    for layout in ("col", "row"):
        b = operand(k, n, layout, torch.float16)
        for bn, bk in ((16, 32), (32, 64)):
            plain = SkinnyConfig(16, bn, bk, 1, 1, 4, True, True)
            got, want = run(replace(plain, pdl=True), a, b), run(plain, a, b)
            check(got, a, b)
            assert torch.equal(got, want), (layout, bn, bk)


@pytest.mark.parametrize("m", [1, 5])
def test_pdl_path_with_an_epilogue_in_fp16_is_the_plain_strips(m, operand):
    """The peeled step under the fused epilogue (bias, SiLU, residual: all read after the wait on a
    GPU), fp16, and M past BLOCK_M (the program's rows loop over row blocks), on every one-row
    layout (3-D, -flat, -flat-sum): bitwise the plain strip's result of its layout, and the
    epilogue's reference within fp16 tolerance."""
    k, n = 300, 37
    a, b = operand(m, k, "row", torch.float16), operand(k, n, "col", torch.float16)
    bias = torch.randn(n, dtype=torch.float16, device=a.device)
    res = torch.randn(m, n, dtype=torch.float16, device=a.device)
    got = {}
    for tail in ("", "-pdl", "-flat", "-flat-pdl", "-flat-sum", "-flat-sum-pdl"):  # (-flat: 2-D, by choice id)
        got[tail] = gemmtune.matmul(a, b, choice="skinny:BM1-BN4-BK128-SK1-S1-W4-core-det" + tail, bias=bias,
                                    activation="silu", residual=res)
    assert torch.equal(got[""], got["-pdl"]) and torch.equal(got["-flat"], got["-flat-pdl"])
    assert torch.equal(got["-flat-sum"], got["-flat-sum-pdl"])
    ref = torch.nn.functional.silu(a.double() @ b.double() + bias.double()) + res.double()
    for tail in ("-pdl", "-flat", "-flat-sum"):
        res_ = compare(got[tail], ref, 2e-3)
        assert res_.ok, (tail, res_.reason)


def test_pdl_is_refused_with_pad_and_where_its_launch_would_not_wait(operand):
    """pad+ copies B in the kernel just before the GEMM, which a -pdl strip reads before its wait:
    refused by name, by matmul and by the tuner's check (UNSUPPORTED, not a result). And the
    launcher itself refuses what validate does (a stream-K or split -pdl config has no prefetch
    path), for a caller that goes around validate."""
    from gemmtune.bench.measure import _unsupported
    from gemmtune.bench.status import Status
    a, b = operand(1, 64, "row", torch.float32), operand(64, 32, "col", torch.float32)
    pdl = "skinny:BM1-BN4-BK64-SK1-S1-W4-core-det-pdl"
    with pytest.raises(ValueError, match="pad\\+ with a -pdl config"):
        gemmtune.matmul(a, b, choice="pad+" + pdl)
    p = Problem.from_sizes(1, 32, 64, "fp32", layout_b="col")
    m = _unsupported(p, Choice.parse("pad+" + pdl))
    assert m is not None and m.status is Status.UNSUPPORTED and "pad+" in m.reason
    assert _unsupported(p, Choice.parse(pdl)) is None
    out = torch.empty(1, 32)
    for bad in (SkinnyConfig(16, 16, 32, 1, 2, 4, True, False, 7, pdl=True), SkinnyConfig(1, 4, 32, 2, pdl=True)):
        with pytest.raises(ValueError, match="PDL path"):
            skinny.run(a, b, out, bad, workspace=SplitKWorkspace())


def test_pdl_is_unsupported_for_the_tuner_on_a_gpu_before_hopper(monkeypatch):
    """The benchmark worker records a -pdl choice on an Ampere GPU as UNSUPPORTED (naming the
    capability), not as an error from its launch; on Hopper it passes the check."""
    from gemmtune.bench.measure import _unsupported
    from gemmtune.bench.status import Status
    p = Problem.from_sizes(1, 32, 64, "fp16", layout_b="col")
    ch = Choice.parse("skinny:BM1-BN4-BK64-SK1-S1-W4-core-det-pdl")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA A100")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    m = _unsupported(p, ch)
    assert m is not None and m.status is Status.UNSUPPORTED and "NVIDIA A100 is 8.0" in m.reason
    assert _unsupported(p, Choice.parse("skinny:BM1-BN4-BK64-SK1-S1-W4-core-det")) is None
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    assert _unsupported(p, ch) is None


def test_pdl_choice_ids_and_constraint():
    """``-pdl`` round-trips through choice ids (after ``-P``, which it never joins), and the
    constraint keeps it to Hopper or later and a K-contiguous B (what its prefetch reads)."""
    ch = Choice.parse("skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det-pdl")
    assert ch.config == SkinnyConfig(1, 4, 1024, 1, 1, 4, False, True, pdl=True)
    assert Choice.parse(ch.id) == ch and ch.id.endswith("-core-det-pdl")
    assert not Choice.parse("skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det").config.pdl
    with pytest.raises(ValueError, match=r"\[-pdl\]"):
        Choice.parse("skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det-PDL")
    col = Problem.from_sizes(1, 2048, 2048, "bf16", layout_b="col")
    row = Problem.from_sizes(1, 2048, 2048, "bf16", layout_b="row")
    cfg = ch.config
    assert skinny.constraint(cfg, col, DeviceInfo.lookup("h200")) is None
    assert "9.0" in skinny.constraint(cfg, col, DeviceInfo.lookup("a100"))
    assert skinny.constraint(cfg, row, DeviceInfo.lookup("h100")) is None  # every layout peels its first step
    # no space offers it yet (opt-in by choice id until measured in a model; kernels.skinny)
    for kind in ("default", "exhaustive"):
        kept, _ = skinny.space(col, DeviceInfo.lookup("h200"), kind)
        assert kept and not any(c.pdl for c in kept)


# ------------------------------------------------------------------ GPU only
gpu = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("layout_b", ["row", "col"])
@pytest.mark.parametrize("shape", [(1, 6144, 4096), (16, 4096, 14336), (7, 50257, 768), (32, 32, 28672),
                                   (3, 1531, 2049), (1, 2048, 2048), (2, 897, 4867)],
                         ids=lambda s: "x".join(map(str, s)))
def test_skinny_gpu_default_space_verifies(shape, layout_b, dtype, operand):
    """Every config of the default space on decode-sized problems, bf16 included; with B
    K-contiguous ('col') the space holds the GEMV strips (skinny_spec._DEFAULT_GEMV)."""
    p = Problem.from_sizes(*shape, "bf16" if dtype == torch.bfloat16 else "fp16", layout_b=layout_b)
    m, n, k = shape
    a, b = operand(m, k, "row", dtype), operand(k, n, layout_b, dtype)
    ws = SplitKWorkspace()
    kept, _ = skinny.space(p, DeviceInfo.from_torch(), "default")
    assert kept
    for cfg in kept:
        check(run(cfg, a, b, ws), a, b)


@gpu
@pytest.mark.gpu
def test_skinny_gpu_prepared_launch_matches(operand):
    a, b = operand(4, 4096, "row", torch.bfloat16), operand(4096, 1000, "col", torch.bfloat16)
    ws = SplitKWorkspace()
    for cfg in (SkinnyConfig(4, 64, 256, 4, 1, 4, False, True), SkinnyConfig(16, 64, 256, 2, 4, 4, True, False),
                SkinnyConfig(16, 32, 128, 1, 3, 4, True, True)):
        out = torch.full((4, 1000), float("nan"), dtype=a.dtype, device=a.device)
        prep = skinny.prepare(a, b, out, cfg, workspace=ws)
        assert prep is not None
        matches, launch = prep
        a2, b2 = operand(4, 4096, "row", torch.bfloat16), operand(4096, 1000, "col", torch.bfloat16)
        assert matches(a2, b2)
        out.fill_(float("nan"))
        launch(a2, b2, out)
        check(out, a2, b2)


@gpu
@pytest.mark.gpu
def test_skinny_gpu_kernels_registry_has_it():
    assert "skinny" in kernels.FAMILIES and "skinny" in kernels.TRITON_FAMILIES


def test_default_space_has_gemv_strips_only_for_a_k_contiguous_b():
    """skinny's GEMV tiles (2-4 column strips, no split) read whole rows of a K-contiguous B; on a
    row-major B their loads would be 4-8 bytes wide, so the space keeps them out there."""
    from gemmtune.kernels import skinny_spec

    h100 = DeviceInfo.lookup("h100")
    for m in (1, 2, 8):
        col = Problem.from_sizes(m, 2048, 2048, "bf16", layout_b="col")
        kept, _ = skinny_spec.space(col, h100)
        gemv = [c for c in kept if not c.dot and c.block_n <= 4]
        assert gemv and all(c.split_k == 1 for c in gemv), m
        assert all(skinny_spec.core_regs(c) <= skinny_spec.MAX_CORE_REGS for c in gemv)
        assert {c.id for c in gemv} <= {c.id for c in skinny_spec.space(col, h100, "exhaustive")[0]}
        row, _ = skinny_spec.space(Problem.from_sizes(m, 2048, 2048, "bf16"), h100)
        assert not [c for c in row if not c.dot and c.block_n <= 4]
    assert not [c for c in skinny_spec.space(Problem.from_sizes(9, 2048, 2048, "bf16", layout_b="col"), h100)[0]
                if not c.dot]


def test_program_cap_refuses_fine_splits_but_not_one_slice_strips_on_wide_n():
    """The cap of 32 programs an SM is on K splits (partials to sum). One-slice GEMV strips on a
    wide N run more programs than that and won there (1 x 28672 x 4096: 58.7 us in 7168 BN4
    strips, the capped space's best 68.1 us; H200, session 39), so the default space keeps them."""
    from gemmtune.kernels import skinny_spec

    h200 = DeviceInfo.lookup("h200")
    for n, k in ((28672, 4096), (128256, 2048)):
        problem = Problem.from_sizes(1, n, k, "bf16", layout_b="col")
        kept, rejected = skinny_spec.space(problem, h200)
        strips = {c.id for c in kept if not c.dot and c.block_n <= 4}
        assert {"BM1-BN2-BK1024-SK1-S1-W4-core-det-flat-sum", "BM1-BN2-BK2048-SK1-S1-W2-core-det-flat"} <= strips, (n, strips)
        assert not [r for r in rejected if "waves" in r[1]], n
    # the same at M = 2, where the GEMV tiles are the 3-D ones (-flat is one row)
    kept, _ = skinny_spec.space(Problem.from_sizes(2, 28672, 4096, "bf16", layout_b="col"), h200)
    assert "BM2-BN4-BK1024-SK1-S1-W4-core-det" in {c.id for c in kept}
    # a split whose programs pass the cap is still refused, with the reason
    fine = SkinnyConfig(1, 4, 512, 2, 1, 4, False, True)
    wide = Problem.from_sizes(1, 28672, 4096, "bf16", layout_b="col")
    assert "over 32 waves of 132 SMs" in skinny_spec.constraint(fine, wide, h200)
    assert skinny_spec.constraint(replace(fine, split_k=1), wide, h200) is None


def test_space_strips_are_never_wider_than_n_needs():
    """BLOCK_N shrinks to N's next power of two (at least 16): a 256-wide strip over N = 1 loads 256
    columns to keep one (on 1 x 1 x 65536 one such candidate ran 32 ms against cuBLAS's 3.7 us)."""
    from gemmtune.device import DeviceInfo
    from gemmtune.kernels import skinny_spec

    h100 = DeviceInfo.lookup("h100")
    for (m, n, k), most in (((1, 1, 65536), 16), ((2, 2, 100003), 16), ((16, 48, 4480), 64), ((1, 6144, 4096), 256)):
        kept, _ = skinny_spec.space(Problem.from_sizes(m, n, k, "bf16"), h100)
        assert kept and max(c.block_n for c in kept) == most, (m, n, k)
        assert len(set(kept)) == len(kept)  # shrunk duplicates dropped


PDL_GEMV = (SkinnyConfig(1, 4, 1024, 1, 1, 4, False, True, pdl=True), SkinnyConfig(1, 2, 2048, 1, 1, 4, False, True, pdl=True))
# (config, M, B layout): the GEMV strips measured in a model, and the peeled paths not yet measured
# (the N-contiguous CUDA-core strip, tl.dot at a batched-decode M, the -flat one-row strips)
PDL_CHAINS = ([(c, 1, "col") for c in PDL_GEMV]
              + [(PDL_GEMV[0], 1, "row"), (SkinnyConfig(16, 64, 64, 1, 1, 4, True, True, pdl=True), 16, "col"),
                 (SkinnyConfig(16, 64, 64, 1, 1, 4, True, True, pdl=True), 16, "row"),
                 (SkinnyConfig(1, 4, 1024, 1, 1, 2, False, True, pdl=True, flat=True), 1, "col"),
                 (SkinnyConfig(1, 4, 1024, 1, 1, 2, False, True, pdl=True, flat=True), 1, "row"),
                 (SkinnyConfig(1, 2, 2048, 1, 1, 2, False, True, pdl=True, flat=True, sum_each=True), 1, "col")])


@gpu
@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU or torch.cuda.get_device_capability()[0] < 9, reason="PDL needs Hopper or later")
@pytest.mark.parametrize("cfg,m,layout", PDL_CHAINS, ids=lambda v: v.id if isinstance(v, SkinnyConfig) else str(v))
def test_skinny_gpu_pdl_chain_in_a_graph_reads_what_the_kernel_before_wrote(cfg, m, layout):
    """A ``-pdl`` GEMV starts before the kernel ahead of it ends; it must still read that
    kernel's output. A chain captured in a CUDA graph, as a decode step is: a pointwise kernel
    writes x, GEMV 1 reads it (y1 = W1 x), GEMV 2 reads GEMV 1's output (y2 = W2 y1), and a
    pointwise kernel reads y2. Replayed with a new x each time, against fp64: a GEMV that read
    its A before the wait would see the previous replay's values. Also eagerly, outside a graph."""
    dev, dt = "cuda", torch.bfloat16
    k, n1, n2 = 2048, 4096, 2048
    w1 = torch.randn(n1, k, device=dev, dtype=dt) / k ** 0.5
    w2 = torch.randn(n2, n1, device=dev, dtype=dt) / n1 ** 0.5
    # B as the GEMM reads it: a Linear's weight transposed (K-contiguous), or a [K, N] row-major copy
    b1, b2 = (w.t() if layout == "col" else w.t().contiguous() for w in (w1, w2))
    src = torch.randn(m, k, device=dev, dtype=dt)
    x, y1, y2 = (torch.empty(m, s, device=dev, dtype=dt) for s in (k, n1, n2))
    out = torch.empty_like(y2)

    def step():
        torch.mul(src, 2.0, out=x)
        skinny.run(x, b1, y1, cfg)
        skinny.run(y1, b2, y2, cfg)
        torch.add(y2, 1.0, out=out)

    def want():
        h = (src.double() * 2.0) @ w1.double().t()
        return h.to(dt).double() @ w2.double().t() + 1.0

    for _ in range(2):
        src.normal_()
        step()
        res = compare(out, want(), TOL[dt])
        assert res.ok, res.reason
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    for _ in range(5):
        src.normal_()
        g.replay()
        res = compare(out, want(), TOL[dt])
        assert res.ok, res.reason


@gpu
@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU or torch.cuda.get_device_capability()[0] < 9, reason="PDL needs Hopper or later")
def test_skinny_gpu_pdl_prepared_launch_and_dispatcher(operand):
    """The prepared (direct) launch of a ``-pdl`` config runs the PDL-compiled kernel with new
    operands, and a dispatcher made of that choice matches fp64 at M = 1 and at a ragged K."""
    cfg = PDL_GEMV[0]
    for m, n, k in ((1, 1000, 4096), (3, 897, 4867)):
        a, b = operand(m, k, "row", torch.bfloat16), operand(k, n, "col", torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=a.dtype, device=a.device)
        prep = skinny.prepare(a, b, out, cfg)
        assert prep is not None
        matches, launch = prep
        check(out, a, b)
        a2 = operand(m, k, "row", torch.bfloat16)
        assert matches(a2, b)
        out.fill_(float("nan"))
        launch(a2, b, out)
        check(out, a2, b)
        check(gemmtune.matmul(a2, b, choice=Choice("skinny", cfg).id), a2, b)
