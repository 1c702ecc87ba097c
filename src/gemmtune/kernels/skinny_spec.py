"""skinny's pure part: its configs, space, constraint, launch plan and model row, no Triton.
The family is kernels.skinny, which re-exports these (see kernels.spec).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from ..configs import (MAX_ACC_REGS_PER_THREAD, SkinnyConfig, block_k_reason, cdiv, check_block_k, fp8_device_reason,
                       min_block_k, next_pow2, prune)
from ..device import DeviceInfo
from ..problem import Problem, element_size
from .base import bmm_reason, tile_row, workspace_reason


NAME = "skinny"


CONFIG = SkinnyConfig


MAX_M = 64            # beyond this the tiled kernels' tensor-core tiles win (the tile is no longer skinny)
CORE_MAX_M = 16       # the CUDA-core path's largest M (its BLOCK_M; constraint says why), in the exhaustive space


MIN_SLICE = 256       # a K-slice shorter than this pays more in partial traffic than it gains


MAX_WORKSPACE_BYTES = 256 * 2**20


# fp32 registers per thread the CUDA-core product may hold (BLOCK_M x BLOCK_N x BLOCK_K
# over the threads): beyond ~64 the loaded tiles and addresses no longer fit in 255.
MAX_CORE_REGS = 64


def k_per_split(k: int, cfg: SkinnyConfig) -> int:
    """K extent of one slice: ceil(K / split) rounded up to a whole number of BLOCK_K (one BLOCK_K
    for K = 0, whose plan is one empty slice: a slice of 0 raised ZeroDivisionError)."""
    per = cdiv(max(k, 1), cfg.split_k)
    return cdiv(per, cfg.block_k) * cfg.block_k


def plan(m: int, n: int, k: int, cfg: SkinnyConfig, sms: int | None = None) -> dict:
    """The launch a config makes at (M, N, K): the one source the launcher, the model's
    features and data collection read.

    >>> from gemmtune.configs import SkinnyConfig
    >>> p = plan(1, 6144, 4096, SkinnyConfig(1, 64, 256, 4, 1, 4, False, True))
    >>> p["grid"], p["splits"], p["k_per_split"], p["workspace_numel"]
    ((96, 4), 4, 1024, 24576)
    """
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    if cfg.stream_k:
        # Stream-K: a fixed grid; every strip may be shared, so every strip counts K-blocks
        # into the atomic-mode workspace. ``splits`` is the K-blocks a program reduces (about).
        units = tiles * cdiv(k, cfg.block_k)
        return {"grid": (cfg.stream_k, 1), "splits": max(1, cfg.stream_k // tiles), "k_per_split": k,
                "tiles": tiles, "workspace_numel": tiles * cfg.block_m * cfg.block_n,
                "workspace_bytes": 4 * tiles * cfg.block_m * cfg.block_n + 4 * tiles,
                "programs": cfg.stream_k,
                "units_per_program": units / cfg.stream_k}
    per = k_per_split(k, cfg)
    splits = max(1, cdiv(k, per))
    # Tile-major fp32 partials (tile_epilogue.split_epilogue): one whole block per strip and slice.
    ws = 0 if splits == 1 else tiles * cfg.block_m * cfg.block_n * (splits if cfg.deterministic else 1)
    return {"grid": (tiles, splits), "splits": splits, "k_per_split": per, "tiles": tiles,
            "workspace_numel": ws, "workspace_bytes": 4 * ws + 4 * tiles if ws else 0,
            "programs": tiles * splits, "units_per_program": None}


def core_regs(cfg: SkinnyConfig) -> int:
    """fp32 registers per thread of the CUDA-core product (0 for the tl.dot path); -flat takes its
    rows one at a time, so its product is one row's [BN, BK].

    >>> three_d = SkinnyConfig(4, 2, 1024, 1, 1, 2, False, True)
    >>> core_regs(three_d), core_regs(SkinnyConfig(4, 2, 1024, 1, 1, 2, False, True, flat=True, sum_each=True))
    (128, 32)
    """
    if cfg.dot:
        return 0
    rows = 1 if cfg.flat else cfg.block_m
    return rows * cfg.block_n * cfg.block_k // (32 * cfg.num_warps)


BMM_WHY = "its column-strip kernel has no batch axis"


def constraint(cfg: SkinnyConfig, problem: Problem, device: DeviceInfo) -> str | None:
    reason = bmm_reason(NAME, problem, BMM_WHY)
    if reason:
        return reason
    m, n, k = problem.m, problem.n, problem.k
    if m > MAX_M:
        return f"M={m} is over {MAX_M}: not a skinny problem (the tiled families serve it)"
    if cfg.block_m < m and cfg.block_m < MAX_M:
        return f"BLOCK_M={cfg.block_m} < M={m}: A would be re-read per row block"
    reason = fp8_device_reason(problem, device)
    if reason:
        return reason
    if cfg.dot and cfg.block_m < 16:
        return "tl.dot needs BLOCK_M >= 16"
    if cfg.dot and cfg.block_m * cfg.block_n // (32 * cfg.num_warps) > MAX_ACC_REGS_PER_THREAD:
        # The tl.dot path holds a BLOCK_M x BLOCK_N fp32 accumulator spread over the threads, as the
        # tiled kernels do: past configs.MAX_ACC_REGS_PER_THREAD it spills (255 registers a thread).
        return (f"{cfg.block_m * cfg.block_n // (32 * cfg.num_warps)} fp32 accumulator registers per thread "
                f"({cfg.block_m}x{cfg.block_n} over {cfg.num_warps} warps) exceeds {MAX_ACC_REGS_PER_THREAD}: "
                "it would spill")
    reason = block_k_reason(cfg.block_k, problem) if cfg.dot else None  # the CUDA-core path has no wgmma
    if reason:
        return reason
    if cfg.stream_k and (not cfg.dot or cfg.deterministic or cfg.split_k != 1):
        return "stream-K runs the tl.dot path with the atomic reduction and no split_k"
    if not cfg.dot and cfg.block_m > 16:
        return f"CUDA-core product with BLOCK_M={cfg.block_m} > 16: the tl.dot path is the one for it"
    if flat_misfit(cfg):
        return FLAT_MISFIT_WHY
    if cfg.pdl:
        if device.capability < (9, 0):
            return f"programmatic dependent launch needs compute capability 9.0 or later ({device.name}: {device.capability_str})"
    regs = core_regs(cfg)
    if regs > MAX_CORE_REGS:
        return (f"{regs} fp32 product registers per thread ({1 if cfg.flat else cfg.block_m}x{cfg.block_n}x{cfg.block_k} over "
                f"{cfg.num_warps} warps) exceeds {MAX_CORE_REGS}: it would spill")
    p = plan(m, n, k, cfg)
    if cfg.stream_k and p["units_per_program"] < 2:
        return f"stream-K over {cfg.stream_k} programs leaves under 2 K-blocks each: too fine"
    if cfg.split_k > 1 and cdiv(k, cfg.split_k) < MIN_SLICE:
        return f"K={k} split {cfg.split_k} ways leaves slices shorter than {MIN_SLICE}"
    if p["splits"] != cfg.split_k and cfg.split_k > 1:
        return f"K={k} in slices of {p['k_per_split']} gives {p['splits']} slices, not {cfg.split_k}"
    if 4 * p["workspace_numel"] > MAX_WORKSPACE_BYTES:
        return f"fp32 workspace of {4 * p['workspace_numel']} B exceeds {MAX_WORKSPACE_BYTES} B"
    # The cap is on K splits: past 32 programs an SM, a split's partial traffic and its sum cost
    # more than the extra streams gain. One-slice strips have nothing to sum, and on wide N they
    # won where the cap had refused them (H200, benchmarks/results/2026-11-29-h200-s39,
    # exp_gemv_wide: 1 x 28672 x 4096 in 7168 BN4 strips 58.7 us, the space's best 68.1; the
    # LM head 1 x 128256 x 2048 128.2 against 133.0).
    if p["splits"] > 1 and p["programs"] > 32 * device.sm_count:
        return f"{p['programs']} programs is over 32 waves of {device.sm_count} SMs: the split is too fine"
    es = element_size(problem.dtype)
    if cfg.dot:
        smem = cfg.num_stages * (cfg.block_m + cfg.block_n) * cfg.block_k * es
        if smem > device.smem_per_block:
            return (f"shared memory {smem} B = {cfg.num_stages} stages x ({cfg.block_m}+{cfg.block_n}) x "
                    f"{cfg.block_k} x {es} B exceeds the {device.smem_per_block} B of {device.name}")
    return None


# Default tiles, from two H200 sweeps (benchmarks/results/2026-11-23-h200-skinny-exp):
# (block_n, block_k, num_warps, num_stages). The tl.dot path with 3-6 stages of 16-64 KB B
# tiles won 19 of 20 decode and long-K problems (a 64x256 tile, 4 warps, on 8 of them in the
# first sweep; with 3-6 stages swept, 256x128 in 3 stages took 16x28672x4096 to 56.8 us, 98%
# of the copy-bandwidth floor, against 59.6 us for the best 4-stage tile);
# the CUDA-core path won only where B's rows are unaligned (1 x 50257 x 768: 32.7 us
# against 46.7 for the best dot config), so it stays in the space at M <= 8.
# The last two, 16-wide strips on 2 warps, from an H100 sweep of B's of 5-22 MB (the layers of
# 0.5-3B models; benchmarks/results/2026-11-27-h100-s26, call 3): twice the programs of a 32-wide
# strip with no split to sum, so more SMs stream B. Best of 445 configs on 8x1536x4096 (8.74 us,
# cuBLAS 8.87) and of 355 on 16x2048x2048 with a K-contiguous B (6.07 us, cuBLAS 6.44).
_DEFAULT_DOT = ((64, 256, 4, 4), (64, 256, 4, 5), (32, 512, 4, 4), (32, 512, 4, 3), (32, 256, 4, 5),
                (128, 128, 4, 4), (256, 128, 4, 3), (64, 128, 4, 6), (32, 128, 8, 4),
                (16, 256, 2, 6), (16, 512, 2, 4))


_DEFAULT_CORE = ((32, 128, 4, 1), (64, 128, 4, 1), (32, 256, 4, 1))


# GEMV tiles for a K-contiguous B (``x @ W.T`` with a row-major weight: a Linear at decode), on the
# CUDA-core path: strips of 2-4 output columns read whole 2-8 KB rows of W with 16-byte loads, so a
# layer of N outputs runs N / 2 or N / 4 programs with no K split. A B of 8-34 MB is only 64-256 KB
# an SM, about what one wave of loads holds, so what counts is putting every load in flight at
# once on every SM, with nothing to sum across programs after (a split's sum cost 1.5-2.5 us at
# these sizes, the same sweep). H100, 1 x N x K bf16 (call 3 of benchmarks/results/
# 2026-11-27-h100-s26), best of these / cuBLAS: 2048x2048 5.40 / 6.44 us, 2048x8192 14.21 /
# 16.25, 896x4864 6.32 / 8.26, 4864x896 5.64 / 5.84, 8192x2048 13.91 / 13.86; skinny's 32-64-wide
# core tiles ran 8.0-22.4 us there, its best dot tiles 6.2-15.5.
_DEFAULT_GEMV = ((2, 1024, 4, 1), (4, 1024, 4, 1), (2, 2048, 4, 1), (4, 512, 2, 1))


# At M = 1 on 16-bit operands the GEMV tiles are one-row -flat strips instead (kernels.skinny,
# SkinnyConfig.flat / sum_each): (BLOCK_N, BLOCK_K, warps, stages, sum_each). On an H200 (session 40,
# benchmarks/results/2026-11-29-h200-s40, call 3) the three layouts of 129-237 strips a shape were
# timed on 12 decode GEMVs of 0.5-8B models; these four, picked greedily, came within 0.985 of the
# sweep's best there (geomean; 0.949 at worst), where the 3-D _DEFAULT_GEMV tiles came within 0.932
# (0.838 at worst). 1 x 16384 x 2048: 18.7 us against 20.1 (cuBLAS 18.5); Qwen2's LM head
# (1 x 151936 x 896) 69.4 against 74.2 (cuBLAS 67.3). -flat-sum holds one fp32 a column (64 registers at
# BN4-BK1024-W2, where -flat held 131 and the 3-D strip 153, sm_90), and in a decode chain of 32
# GEMVs launched with PDL (scripts/exp_pdl_skinny.py) BN2-BK1024-W4 ran 1.197x cuBLAS where the
# 3-D BN4-BK1024-W4 strip ran 1.132x. fp32 keeps _DEFAULT_GEMV: no -flat strip was timed there.
_DEFAULT_ONE_ROW = ((2, 1024, 4, 1, True), (2, 2048, 4, 1, True), (2, 1024, 2, 1, True), (2, 2048, 2, 1, False))

# ... and on a wide layer also these two 8- and 16-column -flat-sum strips. Every program reads A's
# whole row (K elements) from L2, so a strip of BN columns reads A N / BN times: on Qwen2's LM head
# (1 x 151936 x 896) BN2 strips read 136 MB of A from L2 beside the 272 MB weight, BN16 strips 17 MB.
# Where N / 16 still leaves 4 waves of programs (N >= 64 SMs: 8448 on an H200), that saving wins. On
# the two H200 sweeps of session 41 (benchmarks/results/2026-11-30-h200-s41: the committed kernel,
# and session 40's call 7) the four strips above reached 0.960 of the best strip on the 5 layers with
# N >= 9728 (geomean of 10; 0.913 at worst); picked greedily on 4 of them and scored on the fifth,
# these two raised it to 0.995 (0.971 at worst): 1 x 151936 x 896 65.1 us against 69.0, 1 x 16384 x
# 2048 17.8 against 19.1. On the 7 narrower layers they beat none of the four.
_WIDE_ONE_ROW = ((16, 512, 4, 1, True), (8, 512, 4, 1, True))
WIDE_ONE_ROW_WAVES = 4


def one_row_gemv(problem: Problem) -> bool:
    """Whether the default space's GEMV tiles are _DEFAULT_ONE_ROW's -flat strips: M = 1, a
    K-contiguous B, 16-bit operands."""
    return problem.m == 1 and gemv_layout(problem) and problem.dtype in ("bfloat16", "float16")


def one_row_tiles(problem: Problem, device: DeviceInfo) -> tuple[tuple[int, int, int, int, bool], ...]:
    """The default space's one-row strips (BLOCK_N, BLOCK_K, warps, stages, sum_each) for a problem
    where ``one_row_gemv``: _DEFAULT_ONE_ROW, and _WIDE_ONE_ROW where 16-column strips still fill
    WIDE_ONE_ROW_WAVES waves of the GPU's SMs.

    >>> from gemmtune.device import DeviceInfo
    >>> h200 = DeviceInfo.lookup("h200")
    >>> [len(one_row_tiles(Problem.from_sizes(1, n, 2048, "bf16", layout_b="col"), h200)) for n in (6144, 8448, 16384)]
    [4, 6, 6]
    """
    wide = problem.n // 16 >= WIDE_ONE_ROW_WAVES * device.sm_count
    return _DEFAULT_ONE_ROW + (_WIDE_ONE_ROW if wide else ())


FLAT_MAX_M = 8  # -flat-sum's rows a program (a static loop over them in the kernel)
FLAT_MISFIT_WHY = ("the -flat path is the CUDA-core product with A as row vectors: core, no -P, BM1 "
                   f"(-flat) or BM1-BM{FLAT_MAX_M} (-flat-sum); -sum is a -flat option")


def flat_misfit(cfg: SkinnyConfig) -> bool:
    """A ``-flat`` config outside the path it names: CUDA cores with A as row vectors, one row a
    program (BLOCK_M = 1), or up to FLAT_MAX_M with ``-sum``; or ``-sum`` without ``-flat``."""
    if cfg.sum_each and not cfg.flat:
        return True
    most = FLAT_MAX_M if cfg.sum_each else 1
    return cfg.flat and (cfg.block_m > most or cfg.dot or bool(cfg.stream_k))


def gemv_layout(problem: Problem) -> bool:
    """B is K-contiguous (one matrix's layout 'col'): the layout _DEFAULT_GEMV's tiles read."""
    return problem.slice_layout_b == "col"


def core_fit(block_m: int, block_n: int, block_k: int, num_warps: int) -> tuple[int, int]:
    """(BLOCK_N, BLOCK_K) of a default CUDA-core tile shrunk until its product fits MAX_CORE_REGS
    registers per thread: BLOCK_N halved first (down to 16), then BLOCK_K. The default tiles were
    sized for M = 1; at M = 4 and 8 every one of them was rejected, and on fp32 8x5120x5120 the
    core kernel that --fast found at 1.15x cuBLAS (BN16-BK64, H100, benchmarks/results/
    2026-11-27-h100-s20, call 10) was missing from the default space.

    >>> core_fit(1, 64, 128, 4), core_fit(8, 32, 128, 4), core_fit(8, 64, 128, 4)
    ((64, 128), (16, 64), (16, 64))
    """
    while block_m * block_n * block_k > MAX_CORE_REGS * 32 * num_warps and (block_n > 16 or block_k > 16):
        if block_n > 16:
            block_n //= 2
        else:
            block_k //= 2
    return block_n, block_k


SPLITS = (1, 2, 4, 8, 16, 32, 64, 128)


def splits_for(problem: Problem, device: DeviceInfo, block_m: int, block_n: int) -> tuple[int, ...]:
    """The K splits worth trying for one tile: no split, and every split that puts between a
    quarter of a wave and four waves of programs on the SMs while keeping K-slices at least
    MIN_SLICE long (the largest such split when even that leaves the GPU under a quarter full).

    >>> from gemmtune.device import DeviceInfo
    >>> splits_for(Problem.from_sizes(1, 6144, 4096, "bf16"), DeviceInfo.lookup("h200"), 16, 64)
    (1, 2, 4)
    >>> splits_for(Problem.from_sizes(32, 32, 28672, "bf16"), DeviceInfo.lookup("h200"), 32, 32)
    (1, 64)
    """
    tiles = cdiv(problem.m, block_m) * cdiv(problem.n, block_n)
    most = max(1, problem.k // MIN_SLICE)
    ok = [s for s in SPLITS[1:] if s <= most and device.sm_count // 4 <= tiles * s <= 4 * device.sm_count]
    if not ok and tiles < device.sm_count // 4:
        ok = [s for s in SPLITS[1:] if s <= most][-1:]
    return (1, *ok)


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    """(kept, rejected) configs: tl.dot at every M, the CUDA-core path at M <= 8 (default)
    or M <= 16 (exhaustive). The default space fixes the reduction to the deterministic one;
    the exhaustive space has both."""
    m = problem.m
    bm_core = max(1, min(16, 1 << max(0, (m - 1).bit_length())))
    bm_dot = max(16, min(MAX_M, 1 << max(0, (m - 1).bit_length())))
    raw = []
    if kind == "default":
        # 4-byte operands: BLOCK_K halved, so that the dot tiles' stages still fit in shared memory
        # (at fp32 the 16-bit tiles left 2 of skinny's default configs on an H100).
        wide = element_size(problem.dtype) >= 4
        for bn, bk, w, st in _DEFAULT_DOT:
            bk = max(16, bk // 2) if wide else bk
            raw += [SkinnyConfig(bm_dot, bn, bk, s, st, w, True, True) for s in splits_for(problem, device, bm_dot, bn)]
        if m <= 8:
            one_row = one_row_gemv(problem)
            gemv = () if one_row else _DEFAULT_GEMV if gemv_layout(problem) else ()
            for bn, bk, w, st in _DEFAULT_CORE + gemv:
                bn, bk = core_fit(bm_core, bn, bk, w)
                raw += [SkinnyConfig(bm_core, bn, bk, s, st, w, False, True)
                        for s in splits_for(problem, device, bm_core, bn)]
            if one_row:
                raw += [SkinnyConfig(1, bn, bk, s, st, w, False, True, flat=True, sum_each=sum_each)
                        for bn, bk, w, st, sum_each in one_row_tiles(problem, device)
                        for s in splits_for(problem, device, 1, bn)]
    else:
        for bn, bk, w, det, s in itertools.product((16, 32, 64, 128, 256), (64, 128, 256, 512), (2, 4, 8),
                                                   (True, False), SPLITS):
            if m <= CORE_MAX_M:
                raw.append(SkinnyConfig(bm_core, bn, bk, s, 1, w, False, det))
            raw += [SkinnyConfig(bm_dot, bn, bk, s, st, w, True, det) for st in (2, 3, 4, 5, 6)]
        if m <= CORE_MAX_M and gemv_layout(problem):
            # the GEMV strips (_DEFAULT_GEMV) and their neighbours, so that a ranking of this
            # space (--fast) can reach the default space's GEMV tiles
            one_row = one_row_gemv(problem)
            layouts = ((False, False), (True, False), (True, True)) if one_row else ((False, False),)
            raw += [SkinnyConfig(bm_core, bn, bk, 1, 1, w, False, True, flat=flat, sum_each=sum_each)
                    for bn, bk, w in itertools.product((2, 4, 8), (128, 256, 512, 1024, 2048), (2, 4, 8))
                    for flat, sum_each in layouts]
            if one_row:  # 16-column one-row strips (_WIDE_ONE_ROW's widest)
                raw += [SkinnyConfig(1, 16, bk, 1, 1, w, False, True, flat=True, sum_each=sum_each)
                        for bk, w, sum_each in itertools.product((256, 512, 1024), (4, 8), (False, True))]
        # Stream-K only here: on an H200 it lost to the best strip config on all 16 decode problems
        # of the third sweep (1.07-1.75x slower: 1 x 6144 x 4096 17.1 us against 15.0).
        for bn, bk, w, st, per_sm in itertools.product((16, 32, 64, 128, 256), (64, 128, 256, 512), (4, 8),
                                                      (2, 3, 4, 5, 6), (1, 2)):
            raw.append(SkinnyConfig(bm_dot, bn, bk, 1, st, w, True, False, per_sm * device.sm_count))
    # BLOCK_K never longer than a K-slice needs, BLOCK_N never wider than N needs (a 256-wide strip
    # over N = 1 loads 256 columns to keep one: on 1 x 1 x 65536 one such candidate compiled for 4.5 s
    # and ran 32 ms against cuBLAS's 3.7 us, H100 2026-11-27). prune drops the duplicates this makes.
    bn_most = max(16, next_pow2(problem.n))
    scaled = []
    for c in raw:
        per = cdiv(problem.k, c.split_k)
        bk = max(min_block_k(problem), min(c.block_k, 1 << max(0, (per - 1).bit_length())))
        bn = min(c.block_n, bn_most)
        c = c if (bk, bn) == (c.block_k, c.block_n) else replace(c, block_k=bk, block_n=bn)
        # One K-slice: nothing to reduce, so '-atomic' and '-det' launch the same kernel (SPLIT_MODE 0,
        # no workspace: skinny._args). One of the twins is kept, the deterministic one, as the default
        # space has it, so that a top k or --fast's next pick is not spent on the other.
        if not c.stream_k and not c.deterministic and cdiv(problem.k, k_per_split(problem.k, c)) == 1:
            c = replace(c, deterministic=True)
        scaled.append(c)
    return prune(scaled, problem, device, constraint)


def validate(problem: Problem, cfg: SkinnyConfig) -> None:
    reason = bmm_reason(NAME, problem, BMM_WHY)
    if reason:
        raise ValueError(reason)
    for name in ("block_m", "block_n", "block_k"):
        v = getattr(cfg, name)
        if v < 1 or v & (v - 1):
            raise ValueError(f"{name}={v} must be a power of two")
    if cfg.dot and min(cfg.block_m, cfg.block_n, cfg.block_k) < 16:
        raise ValueError("the tl.dot path needs BLOCK_M, BLOCK_N and BLOCK_K >= 16")
    if cfg.dot:  # fp8: BLOCK_K >= 32, the rule the space prunes by (the CUDA-core path has no wgmma)
        check_block_k(cfg, problem)
    if cfg.split_k < 1 or cfg.stream_k < 0:
        raise ValueError(f"split_k={cfg.split_k} must be >= 1 and stream_k={cfg.stream_k} >= 0")
    if cfg.stream_k and (not cfg.dot or cfg.deterministic or cfg.split_k != 1):
        raise ValueError("stream-K (stream_k > 0) runs the tl.dot path with the atomic reduction and split_k=1")
    if cfg.num_warps not in (1, 2, 4, 8, 16) or cfg.num_stages < 1:
        raise ValueError(f"num_warps={cfg.num_warps} must be 1..16 (a power of two), num_stages >= 1")
    if pdl_misfit(cfg):
        raise ValueError(PDL_MISFIT_WHY)
    if flat_misfit(cfg):
        raise ValueError(FLAT_MISFIT_WHY)
    reason = workspace_reason(NAME, plan(problem.m, problem.n, problem.k, cfg)["workspace_numel"], "partials")
    if reason:
        raise ValueError(reason)


PDL_MISFIT_WHY = "the PDL path (-pdl) runs one K-slice: SK1, no -P"


def pdl_misfit(cfg: SkinnyConfig) -> bool:
    """A ``-pdl`` config outside what its path runs: one K-slice (each path, tl.dot and both
    CUDA-core layouts, peels its first K step for the prefetch). Stream-K has no wait at all; a
    split would need its workspace and counters after the wait too, and is untested."""
    return cfg.pdl and (cfg.split_k != 1 or bool(cfg.stream_k))


def fold_misfit(cfg: SkinnyConfig, m: int, k: int) -> str | None:
    """Why ``cfg`` cannot run the norm fold (an RMSNorm of A's rows computed inside the GEMV:
    kernels.skinny.run's ``norm_weight``) at M = ``m``, K = ``k``, or None. The fold needs every
    program to read a whole row of x, and only that row: the one-row -flat strip with one K-slice.
    Pure, so that a pass deciding whether a tuned config can fold imports no Triton.

    >>> fold_misfit(SkinnyConfig(1, 2, 1024, 1, 1, 4, False, True, flat=True, sum_each=True), 1, 2048) is None
    True
    >>> print(fold_misfit(SkinnyConfig(1, 2, 1024, 2, 1, 4, False, True, flat=True), 1, 2048)[:79])
    norm fold: BM1-BN2-BK1024-SK2-S1-W4-core-det-flat splits K=2048 into 2 K-slices
    """
    where = f"norm fold: {cfg.id}"
    if cfg.dot or cfg.stream_k:
        return f"{where} is a tl.dot config; the fold is built into the CUDA-core one-row -flat strip"
    if cfg.block_m != 1:
        return (f"{where} takes BLOCK_M={cfg.block_m} rows a program (M={m}); the fold needs a one-row strip "
                "(BLOCK_M = 1), whose program reads its row of x as one vector")
    if not cfg.flat:
        return (f"{where} is the 3-D strip; the fold is built into the -flat / -flat-sum one-row layouts "
                "(its -flat twin, replace(cfg, flat=True), can fold)")
    splits = cdiv(k, k_per_split(k, cfg))
    if splits > 1:
        return (f"{where} splits K={k} into {splits} K-slices; a program then sees only its slice of x, "
                "so none has the row's sum of squares")
    return None


def features_row(facts: tuple, choice) -> tuple:
    cfg = choice.config
    p = plan(*facts[:3], cfg)  # the launcher's own arithmetic
    # No pdl feature: the ranker never ranks a -pdl config (no space offers one; pdl=True serves
    # the twins of the tuned winners, gemmtune.pdl), and what PDL gains depends on the kernel
    # before it, which no row of a lone shape knows.
    # det: only where there is a reduction; with one K-slice both modes are one kernel (space())
    return tile_row(facts, choice, cfg, splits=p["splits"], det=int(cfg.deterministic and p["splits"] > 1),
                    k_len=p["k_per_split"] if p["splits"] > 1 else facts[2], group_m=1)
