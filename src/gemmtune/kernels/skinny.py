"""skinny: a bandwidth kernel for decode-shaped GEMMs (M from 1 to about 64).

At M <= 64 the product is bound by reading B (and a long A) once from HBM, not by
arithmetic: 1 x 6144 x 4096 bf16 moves 50 MB for 50 MFLOP, 0.5% of the tensor-core
floor. What counts is bytes in flight on every SM. So one program owns a BLOCK_N
column strip of the output for *all* M rows (A is re-read once per strip, from L2),
reads its K-slice of B in BLOCK_K x BLOCK_N tiles with 16-byte loads along B's
contiguous dim, and the K dim is split across programs (program axis 1) so that a
skinny output still puts several programs on every SM.

Two inner products, a config switch (``SkinnyConfig.dot``):

* ``dot``: tl.dot with BLOCK_M >= 16 (the MMA minimum; rows past M are masked, so
  they cost no memory traffic). Triton pipelines the B tiles through shared memory
  with ``num_stages`` asynchronous copies in flight.
* CUDA cores: a ``BLOCK_M x BLOCK_N x BLOCK_K`` fp32 product accumulated elementwise
  in registers across the K loop and reduced once at the end, so the loop body is
  only loads and FMAs (a reduction per iteration would add shuffles on the critical
  path). For M = 1..8, where an MMA would multiply mostly masked rows.

The K-slices are reduced by the fused split-K epilogue that the tiled kernel uses
(``tiled.split_epilogue``): partials in an fp32 workspace, the last program to arrive
at a strip sums them (in slice order when ``deterministic``), so it stays one launch.
"""

from __future__ import annotations

import itertools
import math

import torch
import triton
import triton.language as tl

from ..configs import SkinnyConfig, cdiv, min_block_k, prune
from ..device import DeviceInfo
from ..problem import Problem, element_size
from .base import Unsupported, bmm_reason, tile_row
from .splitk import SplitKWorkspace
from ..epilogue import EpilogueArgs
from .tiled import (_INTERPRETED, _launch, _pow2_divisor, direct, epilogue_consts, epilogue_pointers,
                    epilogue_strides, epilogue_tensors, input_precision, lead_divisor, mma, needs_int64,
                    split_epilogue)

NAME = "skinny"
CONFIG = SkinnyConfig

MAX_M = 64            # beyond this the tiled kernels' tensor-core tiles win (the tile is no longer skinny)
MIN_SLICE = 256       # a K-slice shorter than this pays more in partial traffic than it gains
MAX_WORKSPACE_BYTES = 256 * 2**20
# fp32 registers per thread the CUDA-core product may hold (BLOCK_M x BLOCK_N x BLOCK_K
# over the threads): beyond ~64 the loaded tiles and addresses no longer fit in 255.
MAX_CORE_REGS = 64


@triton.jit
def _skinny_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, bias_ptr, res_ptr, sa_ptr, sb_ptr,
    M, N, K, K_PER_SPLIT,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_bias, stride_rm, stride_rn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    DOT: tl.constexpr, SPLIT_MODE: tl.constexpr, EVEN_K: tl.constexpr, STREAM: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, INDEX_64: tl.constexpr,
    AK_UNIT: tl.constexpr, BK_UNIT: tl.constexpr, BN_UNIT: tl.constexpr,
    A_LEAD_DIV: tl.constexpr, B_LEAD_DIV: tl.constexpr, K_DIV: tl.constexpr,
    GPU_FENCE: tl.constexpr, KS_DIV: tl.constexpr,
    HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, RN_UNIT: tl.constexpr,
    SCALE: tl.constexpr,
):
    # Unit strides as constexprs, so that the contiguous dim is known at compile time. What
    # the leading strides are multiples of (A_LEAD_DIV / B_LEAD_DIV) is stated on the offset
    # tensors (``_lead``): a multiple_of on the scalar stride does not reach Triton's
    # alignment analysis (see tiled.py).
    if AK_UNIT:
        sak = 1
    else:
        sak = stride_ak
    sam = stride_am
    if BK_UNIT:
        sbk = 1
        sbn = stride_bn
    elif BN_UNIT:
        sbn = 1
        sbk = stride_bk
    else:
        sbk = stride_bk
        sbn = stride_bn
    if RN_UNIT:
        srn = 1
    else:
        srn = stride_rn

    if STREAM:
        _stream_k(a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K, sam, sak, sbk, sbn, stride_cm, stride_cn,
                  BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, INPUT_PRECISION, INDEX_64, GPU_FENCE,
                  AK_UNIT, BN_UNIT, A_LEAD_DIV, B_LEAD_DIV,
                  bias_ptr, res_ptr, stride_bias, stride_rm, srn, HAS_BIAS, ACT, HAS_RES, sa_ptr, sb_ptr, SCALE)
    else:
        _strip(a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K, K_PER_SPLIT, sam, sak, sbk, sbn,
               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, DOT, SPLIT_MODE, EVEN_K, INPUT_PRECISION,
               INDEX_64, BK_UNIT, K_DIV, GPU_FENCE, AK_UNIT, BN_UNIT, A_LEAD_DIV, B_LEAD_DIV, KS_DIV,
               bias_ptr, res_ptr, stride_bias, stride_rm, srn, HAS_BIAS, ACT, HAS_RES, sa_ptr, sb_ptr, SCALE)


@triton.jit
def _offsets(rows, cols, s_rows, s_cols, DIV: tl.constexpr, LEAD_IS_ROWS: tl.constexpr):
    """``rows * s_rows + cols * s_cols`` ([R, 1] and [1, C] index tensors), with what the
    leading (non-unit) stride is a multiple of stated on its term: on the scalar stride the
    hint does not reach Triton's alignment analysis (tiled.py says what that cost)."""
    r = rows * s_rows
    c = cols * s_cols
    if DIV > 1:
        # Only on a term with more than one row / column: a [1, 1] tensor with the hint (the
        # CUDA-core path at BLOCK_M = 1) crashed Triton's coalesce pass (triton 3.6 on an H200,
        # 3.9 here); a single row's alignment does not decide any vector width anyway.
        if LEAD_IS_ROWS:
            if r.shape[0] > 1:
                r = tl.multiple_of(r, [DIV, DIV])
        else:
            if c.shape[1] > 1:
                c = tl.multiple_of(c, [DIV, DIV])
    return r + c


@triton.jit
def _strip(a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K, K_PER_SPLIT, sam, sak, sbk, sbn, stride_cm, stride_cn,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT: tl.constexpr,
           SPLIT_MODE: tl.constexpr, EVEN_K: tl.constexpr, INPUT_PRECISION: tl.constexpr,
           INDEX_64: tl.constexpr, BK_UNIT: tl.constexpr, K_DIV: tl.constexpr, GPU_FENCE: tl.constexpr,
           AK_UNIT: tl.constexpr, BN_UNIT: tl.constexpr, A_LEAD_DIV: tl.constexpr, B_LEAD_DIV: tl.constexpr,
           KS_DIV: tl.constexpr,
           bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn,
           HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, sa_ptr, sb_ptr, SCALE: tl.constexpr):
    """One program = one column strip x one K-slice (program axes 0 and 1)."""
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    grid_n = tl.cdiv(N, BLOCK_N)
    pid_n = pid % grid_n
    pid_m = pid // grid_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < N
    k_start = pid_k * K_PER_SPLIT
    if KS_DIV > 1:  # 0 with one slice, a multiple of BLOCK_K otherwise (see tiled.py)
        k_start = tl.multiple_of(k_start, KS_DIV)
    k_end = tl.minimum(k_start + K_PER_SPLIT, K)
    if K_DIV > 1:
        k_end = tl.multiple_of(k_end, K_DIV)
    if INDEX_64:
        rm_i = rm.to(tl.int64)
        rn_i = rn.to(tl.int64)
        rk_i = (k_start + rk).to(tl.int64)
    else:
        rm_i = rm
        rn_i = rn
        rk_i = k_start + rk

    a_ptrs = a_ptr + _offsets(rm_i[:, None], rk_i[None, :], sam, sak, A_LEAD_DIV, AK_UNIT)   # [BM, BK]
    if DOT:
        b_ptrs = b_ptr + _offsets(rk_i[:, None], rn_i[None, :], sbk, sbn, B_LEAD_DIV, BN_UNIT)  # [BK, BN]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_start, k_end, BLOCK_K):
            if EVEN_K:
                a = tl.load(a_ptrs, mask=m_ok[:, None], other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :], other=0.0)
            else:
                kk = k + rk
                a = tl.load(a_ptrs, mask=m_ok[:, None] & (kk[None, :] < k_end), other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :] & (kk[:, None] < k_end), other=0.0)
            acc = mma(a, b, acc, INPUT_PRECISION)
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
    elif BK_UNIT:
        # B is K-contiguous (x @ W.T with a row-major weight): tiles [BN, BK], 16-byte
        # vectors along K; the product [BM, BN, BK] is reduced over K after the loop.
        b_ptrs = b_ptr + _offsets(rn_i[:, None], rk_i[None, :], sbn, sbk, B_LEAD_DIV, BK_UNIT)  # [BN, BK]
        prod = tl.zeros((BLOCK_M, BLOCK_N, BLOCK_K), dtype=tl.float32)
        for k in range(k_start, k_end, BLOCK_K):
            if EVEN_K:
                a = tl.load(a_ptrs, mask=m_ok[:, None], other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[:, None], other=0.0)
            else:
                kk = k + rk
                a = tl.load(a_ptrs, mask=m_ok[:, None] & (kk[None, :] < k_end), other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[:, None] & (kk[None, :] < k_end), other=0.0)
            prod += a.to(tl.float32)[:, None, :] * b.to(tl.float32)[None, :, :]
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
        acc = tl.sum(prod, axis=2)
    else:
        # B is N-contiguous (a @ W with W [K, N] row-major): tiles [BK, BN], vectors along N.
        b_ptrs = b_ptr + _offsets(rk_i[:, None], rn_i[None, :], sbk, sbn, B_LEAD_DIV, BN_UNIT)  # [BK, BN]
        prod = tl.zeros((BLOCK_M, BLOCK_K, BLOCK_N), dtype=tl.float32)
        for k in range(k_start, k_end, BLOCK_K):
            if EVEN_K:
                a = tl.load(a_ptrs, mask=m_ok[:, None], other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :], other=0.0)
            else:
                kk = k + rk
                a = tl.load(a_ptrs, mask=m_ok[:, None] & (kk[None, :] < k_end), other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :] & (kk[:, None] < k_end), other=0.0)
            prod += a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :]
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
        acc = tl.sum(prod, axis=1)

    split_epilogue(acc, c_ptr, ws_ptr, lock_ptr, rm_i, rn_i, m_ok[:, None] & n_ok[None, :],
                   stride_cm, stride_cn, M, N, pid, pid_k, 1, tl.num_programs(1),
                   SPLIT_MODE, GPU_FENCE, BLOCK_M, BLOCK_N,
                   bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn, HAS_BIAS, ACT, HAS_RES,
                   sa_ptr, sb_ptr, SCALE)


@triton.jit
def _stream_k(a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K, sam, sak, sbk, sbn, stride_cm, stride_cn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
              INPUT_PRECISION: tl.constexpr, INDEX_64: tl.constexpr, GPU_FENCE: tl.constexpr,
              AK_UNIT: tl.constexpr, BN_UNIT: tl.constexpr, A_LEAD_DIV: tl.constexpr, B_LEAD_DIV: tl.constexpr,
              bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn,
              HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, sa_ptr, sb_ptr, SCALE: tl.constexpr):
    """Stream-K over (strip, K-block) units: the grid is a fixed number of programs (one or two
    per SM) and each reduces an equal, contiguous run of units, crossing from one strip into the
    next where its run does. So no SM idles when the strips do not divide into waves (1 x 6144 x
    4096 in 64-wide strips is 96 programs on 132 SMs). Each strip segment is added atomically into
    the fp32 workspace; the program that completes a strip's K-block count writes it out."""
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BLOCK_N)
    kb_per_strip = tl.cdiv(K, BLOCK_K)
    units = tl.cdiv(M, BLOCK_M) * grid_n * kb_per_strip
    progs = tl.num_programs(0)
    start = (pid * units) // progs
    end = ((pid + 1) * units) // progs
    first = start // kb_per_strip
    # A plain for loop over the strips the run touches (not a while over units): Triton's
    # software pipeliner handles a K loop nested in a for loop (its persistent-matmul tutorial
    # has that shape); the first H200 sweep of this path, written with a while, ran 1.07-1.75x
    # slower than the strip kernel, which a K loop without its pipeline would explain.
    n_seg = tl.where(end > start, (end - 1) // kb_per_strip - first + 1, 0)
    rk = tl.arange(0, BLOCK_K)
    for seg in range(0, n_seg):
        strip = first + seg
        kb0 = tl.maximum(start - strip * kb_per_strip, 0)
        n_kb = tl.minimum(end - strip * kb_per_strip, kb_per_strip) - kb0
        pid_n = strip % grid_n
        pid_m = strip // grid_n
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        m_ok = rm < M
        n_ok = rn < N
        k0 = kb0 * BLOCK_K
        if INDEX_64:
            rm_i = rm.to(tl.int64)
            rn_i = rn.to(tl.int64)
            rk_i = (k0 + rk).to(tl.int64)
        else:
            rm_i = rm
            rn_i = rn
            rk_i = k0 + rk
        a_ptrs = a_ptr + _offsets(rm_i[:, None], rk_i[None, :], sam, sak, A_LEAD_DIV, AK_UNIT)
        b_ptrs = b_ptr + _offsets(rk_i[:, None], rn_i[None, :], sbk, sbn, B_LEAD_DIV, BN_UNIT)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for i in range(0, n_kb):
            if EVEN_K:
                a = tl.load(a_ptrs, mask=m_ok[:, None], other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :], other=0.0)
            else:
                kk = k0 + i * BLOCK_K + rk
                a = tl.load(a_ptrs, mask=m_ok[:, None] & (kk[None, :] < K), other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :] & (kk[:, None] < K), other=0.0)
            acc = mma(a, b, acc, INPUT_PRECISION)
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
        split_epilogue(acc, c_ptr, ws_ptr, lock_ptr, rm_i, rn_i, m_ok[:, None] & n_ok[None, :],
                       stride_cm, stride_cn, M, N, strip, 0, n_kb, kb_per_strip,
                       2, GPU_FENCE, BLOCK_M, BLOCK_N,
                       bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn, HAS_BIAS, ACT, HAS_RES,
                       sa_ptr, sb_ptr, SCALE)


# ---------------------------------------------------------------------- plan + space

def k_per_split(k: int, cfg: SkinnyConfig) -> int:
    """K extent of one slice: ceil(K / split) rounded up to a whole number of BLOCK_K."""
    per = cdiv(k, cfg.split_k)
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
    splits = cdiv(k, per)
    # Tile-major fp32 partials (tile_epilogue.split_epilogue): one whole block per strip and slice.
    ws = 0 if splits == 1 else tiles * cfg.block_m * cfg.block_n * (splits if cfg.deterministic else 1)
    return {"grid": (tiles, splits), "splits": splits, "k_per_split": per, "tiles": tiles,
            "workspace_numel": ws, "workspace_bytes": 4 * ws + 4 * tiles if ws else 0,
            "programs": tiles * splits, "units_per_program": None}


def core_regs(cfg: SkinnyConfig) -> int:
    """fp32 registers per thread of the CUDA-core product (0 for the tl.dot path)."""
    return 0 if cfg.dot else cfg.block_m * cfg.block_n * cfg.block_k // (32 * cfg.num_warps)


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
    if cfg.dot and cfg.block_m < 16:
        return "tl.dot needs BLOCK_M >= 16"
    if cfg.dot and cfg.block_k < min_block_k(problem):
        return f"BLOCK_K={cfg.block_k} < {min_block_k(problem)}: fp8 wgmma consumes K = 32 per instruction"
    if cfg.stream_k and (not cfg.dot or cfg.deterministic or cfg.split_k != 1):
        return "stream-K runs the tl.dot path with the atomic reduction and no split_k"
    if not cfg.dot and cfg.block_m > 16:
        return f"CUDA-core product with BLOCK_M={cfg.block_m} > 16: the tl.dot path is the one for it"
    regs = core_regs(cfg)
    if regs > MAX_CORE_REGS:
        return (f"{regs} fp32 product registers per thread ({cfg.block_m}x{cfg.block_n}x{cfg.block_k} over "
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
    if p["programs"] > 32 * device.sm_count:
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
_DEFAULT_DOT = ((64, 256, 4, 4), (64, 256, 4, 5), (32, 512, 4, 4), (32, 512, 4, 3), (32, 256, 4, 5),
                (128, 128, 4, 4), (256, 128, 4, 3), (64, 128, 4, 6), (32, 128, 8, 4))
_DEFAULT_CORE = ((32, 128, 4, 1), (64, 128, 4, 1), (32, 256, 4, 1))
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
        for bn, bk, w, st in _DEFAULT_DOT:
            raw += [SkinnyConfig(bm_dot, bn, bk, s, st, w, True, True) for s in splits_for(problem, device, bm_dot, bn)]
        if m <= 8:
            for bn, bk, w, st in _DEFAULT_CORE:
                raw += [SkinnyConfig(bm_core, bn, bk, s, st, w, False, True)
                        for s in splits_for(problem, device, bm_core, bn)]
    else:
        for bn, bk, w, det, s in itertools.product((16, 32, 64, 128, 256), (64, 128, 256, 512), (2, 4, 8),
                                                   (True, False), SPLITS):
            if m <= 16:
                raw.append(SkinnyConfig(bm_core, bn, bk, s, 1, w, False, det))
            raw += [SkinnyConfig(bm_dot, bn, bk, s, st, w, True, det) for st in (2, 3, 4, 5, 6)]
        # Stream-K only here: on an H200 it lost to the best strip config on all 16 decode problems
        # of the third sweep (1.07-1.75x slower: 1 x 6144 x 4096 17.1 us against 15.0).
        for bn, bk, w, st, per_sm in itertools.product((16, 32, 64, 128, 256), (64, 128, 256, 512), (4, 8),
                                                      (2, 3, 4, 5, 6), (1, 2)):
            raw.append(SkinnyConfig(bm_dot, bn, bk, 1, st, w, True, False, per_sm * device.sm_count))
    # BLOCK_K never longer than a K-slice needs.
    scaled = []
    for c in raw:
        per = cdiv(problem.k, c.split_k)
        bk = max(min_block_k(problem), min(c.block_k, 1 << max(0, (per - 1).bit_length())))
        scaled.append(c if bk == c.block_k else SkinnyConfig(c.block_m, c.block_n, bk, c.split_k, c.num_stages,
                                                             c.num_warps, c.dot, c.deterministic, c.stream_k))
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
    if cfg.split_k < 1 or cfg.stream_k < 0:
        raise ValueError(f"split_k={cfg.split_k} must be >= 1 and stream_k={cfg.stream_k} >= 0")
    if cfg.stream_k and (not cfg.dot or cfg.deterministic or cfg.split_k != 1):
        raise ValueError("stream-K (stream_k > 0) runs the tl.dot path with the atomic reduction and split_k=1")
    if cfg.num_warps not in (1, 2, 4, 8, 16) or cfg.num_stages < 1:
        raise ValueError(f"num_warps={cfg.num_warps} must be 1..16 (a power of two), num_stages >= 1")


# ---------------------------------------------------------------------- launch

def _args(a, b, c, cfg: SkinnyConfig, ws, locks, allow_tf32: bool, epilogue: EpilogueArgs | None = None):
    M, K = a.shape
    N = b.shape[1]
    p = plan(M, N, K, cfg)
    per, splits = p["k_per_split"], p["splits"]
    split_mode = 2 if cfg.stream_k else 0 if splits == 1 else (1 if cfg.deterministic else 2)
    bk_unit = b.stride(0) == 1 and b.stride(1) != 1
    args = (a, b, c, c if ws is None else ws, c if locks is None else locks, *epilogue_pointers(epilogue, c),
            M, N, K, per, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            *epilogue_strides(epilogue))
    consts = dict(
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, DOT=cfg.dot,
        SPLIT_MODE=split_mode, STREAM=bool(cfg.stream_k), EVEN_K=K % cfg.block_k == 0 and per % cfg.block_k == 0,
        INPUT_PRECISION=input_precision(a.dtype, allow_tf32),
        INDEX_64=needs_int64(a, b, c, *epilogue_tensors(epilogue)) or (ws is not None and needs_int64(ws)),
        AK_UNIT=a.stride(1) == 1, BK_UNIT=bk_unit, BN_UNIT=not bk_unit and b.stride(1) == 1,
        A_LEAD_DIV=lead_divisor(a), B_LEAD_DIV=lead_divisor(b),
        K_DIV=_pow2_divisor(math.gcd(K, per)), GPU_FENCE=split_mode != 0 and not _INTERPRETED,
        KS_DIV=16 if splits == 1 else _pow2_divisor(per),
        **epilogue_consts(epilogue),
    )
    return p, args, consts


def _buffers(a, b, cfg: SkinnyConfig, workspace: SplitKWorkspace | None):
    M, K = a.shape
    p = plan(M, b.shape[1], K, cfg)
    if p["splits"] == 1 and not cfg.stream_k:
        return None, None
    ws = workspace or SplitKWorkspace()  # a fresh one is correct, only slower
    return (ws.partials(p["workspace_numel"], cfg.deterministic, a.device),
            ws.counters(p["tiles"], a.device))


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: SkinnyConfig, *,
        allow_tf32: bool = False, workspace: SplitKWorkspace | None = None,
        epilogue: EpilogueArgs | None = None):
    """The skinny kernel into ``out``; the ``epilogue`` runs on each strip's complete fp32 sum,
    in the program that writes it (tiled.split_epilogue)."""
    ws, locks = _buffers(a, b, cfg, workspace)
    p, args, consts = _args(a, b, out, cfg, ws, locks, allow_tf32, epilogue)
    return _launch(_skinny_kernel, p["grid"], args,
                   {**consts, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages})


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: SkinnyConfig, *,
            allow_tf32: bool = False, workspace: SplitKWorkspace | None = None,
            epilogue: EpilogueArgs | None = None):
    """Launch once into ``out`` and return ``(matches(a, b), launch(a, b, out))`` for cheap
    repeated launches (as kernels.tiled.prepare_direct), or None; with an ``epilogue`` both
    take it as a keyword (``epilogue=e``)."""
    if _INTERPRETED:
        return None
    p = plan(a.shape[0], b.shape[1], a.shape[1], cfg)
    if (p["splits"] > 1 or cfg.stream_k) and workspace is None:
        return None
    ws, locks = _buffers(a, b, cfg, workspace)
    _, args, consts = _args(a, b, out, cfg, ws, locks, allow_tf32, epilogue)
    kernel = _skinny_kernel[p["grid"]](*args, **consts, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    d = direct(_skinny_kernel, kernel, p["grid"], args, consts, a, b, ws, epilogue)
    if d is None or ws is None:
        return None if d is None else (d.matches, d)

    def matches(a, b, epilogue=None):
        return d.matches(a, b, workspace.partials(p["workspace_numel"], cfg.deterministic, a.device), epilogue)

    def launch(a, b, c, epilogue=None):
        d(a, b, c, workspace.partials(p["workspace_numel"], cfg.deterministic, a.device),
          workspace.counters(p["tiles"], a.device), epilogue)
    return matches, launch


def features_row(facts: tuple, choice) -> tuple:
    cfg = choice.config
    p = plan(*facts[:3], cfg)  # the launcher's own arithmetic
    return tile_row(facts, choice, cfg, splits=p["splits"], det=int(cfg.deterministic),
                    k_len=p["k_per_split"] if p["splits"] > 1 else facts[2], group_m=1)


def inductor_export(choice, problem: Problem, sm_count: int | None = None) -> dict:
    raise Unsupported(f"family {NAME}: no Inductor template")
