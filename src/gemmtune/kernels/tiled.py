"""The one tiled Triton matmul body that triton_mm, splitk and decompose_k share.

One program computes a BLOCK_M x BLOCK_N tile over one K-slice (program axis 1):

* SPLIT_MODE 0 stores the fp32 accumulator, cast to the output's dtype, at
  ``c + pid_k * stride_cz``: plain mm when there is one slice, and the batched
  fp32 partials of DecomposeK otherwise.
* SPLIT_MODE 1/2 is the fused split-K: every program leaves its fp32 partial in a
  workspace and bumps a per-tile arrival counter; the last program to arrive sums
  the partials (mode 1: in slice order 0..S-1, so results are bitwise reproducible;
  mode 2: partials were atomically added, order varies) and writes the output, then
  resets the counter. One launch, no spinning, so no deadlock whatever the schedule.
* BATCHED (bmm, mode 0 only, no epilogue): program axis 2 is the batch; each operand's
  pointer steps by its own batch stride (int64; 0 for an operand broadcast over the batch),
  with that stride's power-of-two divisor stated (AB_DIV/BB_DIV/CB_DIV) so that every
  matrix keeps the 16-byte vector loads and the cp.async pipeline of the first.
* Both final stores (mode 0's, and the last arriver's in modes 1/2) apply the fused
  epilogue, ``act(acc + bias) + residual`` in fp32 (gemmtune.epilogue; ``fused_epilogue``),
  selected by constexprs that a plain mm leaves off (DecomposeK's partials too: its sum
  kernel applies it).

Alignment: the kernel specialises; the tuner can also copy. Triton's JIT
specialises on 16-byte divisibility of pointers and integer strides, so an
aligned operand gets 16-byte vector loads and an unaligned one (odd leading
stride, odd storage offset) compiles to narrower loads, correct for any input
and with no extra memory traffic. For truly unaligned problems that is slow
(4095^3 bf16: 1.76 ms with narrow loads on an H200), so the tuner also offers
every family as a ``pad+`` choice that runs on zero-padded aligned copies
(kernels.run_choice) and lets the measurement decide: there 'pad+aten' took
0.32 ms against cuBLAS's 0.91 ms on the unaligned operands. Copying is never
forced, because it costs a read and write of each operand per call.
Unit strides are passed as constexprs, so the contiguous dim is known at compile
time whatever triton version decides about specialising on 1.
"""

from __future__ import annotations

import contextlib
import contextvars
import math

import torch
import triton
import triton.language as tl

from ..epilogue import NONE, EpilogueArgs
from ..precision import fp32_precision
from ..configs import cdiv, next_pow2
from .launch_args import (_INT32_LIMIT, N_POINTERS, _pow2_divisor, batch_divisor, edge_masks,  # noqa: F401
                          epilogue_consts, epilogue_key, epilogue_pointers, epilogue_strides, epilogue_tensors,
                          gpu_sm_count, lead_divisor, needs_int64, store_divisor)
from .relaunch import relaunch, runner_and_args
from .tile_epilogue import (FP8_PROMOTE, UPCAST_BF16, _gpu_fence, _sum_splits_kernel, activation,  # noqa: F401
                            fused_epilogue, mma, split_epilogue)


# tl.assume (an LLVM assumption, no code) where this triton has it.
_HAS_ASSUME = tl.constexpr(hasattr(tl, "assume"))


@triton.jit
def _operand_offsets(ram, rbn, rkk, sam, sak, sbk, sbn, A_LEAD_DIV: tl.constexpr, B_LEAD_DIV: tl.constexpr,
                     AK_UNIT: tl.constexpr, BN_UNIT: tl.constexpr):
    """Element offsets of A's (rows ``ram``, K indices ``rkk``) and B's (``rkk``, columns ``rbn``)
    tiles. When an operand's leading stride is a multiple of the vector width but not of 16
    elements (a 1000-wide bf16 row: 2000 B, 16-byte aligned), a multiple_of on the scalar stride
    argument did not reach Triton's alignment analysis (triton 3.6 and 3.9 compiled scalar loads and
    no cp.async pipeline for 1000^3: 47 us on an H200 against 11 us for Inductor's template, which
    bakes the stride in as a constant); stated on the offset tensor itself, it does."""
    a_lead = ram[:, None] * sam
    a_cols = rkk[None, :] * sak
    b_lead = rkk[:, None] * sbk
    b_cols = rbn[None, :] * sbn
    if A_LEAD_DIV > 1:
        if AK_UNIT:
            a_lead = tl.multiple_of(a_lead, [A_LEAD_DIV, A_LEAD_DIV])
        else:
            a_cols = tl.multiple_of(a_cols, [A_LEAD_DIV, A_LEAD_DIV])
    if B_LEAD_DIV > 1:
        if BN_UNIT:
            b_lead = tl.multiple_of(b_lead, [B_LEAD_DIV, B_LEAD_DIV])
        else:
            b_cols = tl.multiple_of(b_cols, [B_LEAD_DIV, B_LEAD_DIV])
    return a_lead + a_cols, b_lead + b_cols


@triton.jit
def _load_tiles(a_ptrs, b_ptrs, a_row_ok, b_col_ok, rk, k_left, EVEN_K: tl.constexpr, MASK_M: tl.constexpr,
                MASK_N: tl.constexpr):
    """One K-block of A and B: masked along K unless EVEN_K (``rk``, the block's arange, against
    ``k_left``, the scalar count of K indices left from the block's start), along M / N where
    MASK_M / MASK_N.
    The K mask compares the loop-invariant arange with one scalar, as Inductor's template does,
    not ``(k + rk) < k_end``: that form recomputed and compared every element's K index in each
    iteration, in 64 bits (333x4097x1025 bf16, BM64-BN128-BK64, sm_90a, triton 3.9: 733 SASS
    instructions a K iteration, 64 ISETP.GE.U32 + 64 ISETP.GE.U32.EX + 63 IADD3.X of them, against
    465 this way and 437 for Inductor's template; on an H200 the old form executed 1.6x
    Inductor's instructions on that shape and ran 1.06x its time)."""
    return _load_a(a_ptrs, a_row_ok, rk, k_left, EVEN_K, MASK_M), _load_b(b_ptrs, b_col_ok, rk, k_left, EVEN_K, MASK_N)


@triton.jit
def _load_a(a_ptrs, a_row_ok, rk, k_left, EVEN_K: tl.constexpr, MASK_M: tl.constexpr):
    """A's [BM, BK] block (_load_tiles)."""
    if EVEN_K:
        if MASK_M:
            a = tl.load(a_ptrs, mask=a_row_ok, other=0.0)
        else:
            a = tl.load(a_ptrs)
    else:
        if MASK_M:
            a = tl.load(a_ptrs, mask=a_row_ok & (rk[None, :] < k_left), other=0.0)
        else:
            a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
    return a


@triton.jit
def _load_b(b_ptrs, b_col_ok, rk, k_left, EVEN_K: tl.constexpr, MASK_N: tl.constexpr):
    """B's [BK, BN] block (_load_tiles)."""
    if EVEN_K:
        if MASK_N:
            b = tl.load(b_ptrs, mask=b_col_ok, other=0.0)
        else:
            b = tl.load(b_ptrs)
    else:
        if MASK_N:
            b = tl.load(b_ptrs, mask=b_col_ok & (rk[:, None] < k_left), other=0.0)
        else:
            b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
    return b


@triton.jit
def _tiled_mm_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, bias_ptr, res_ptr, sa_ptr, sb_ptr,
    M, N, K, K_PER_SPLIT,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cz, stride_cm, stride_cn,
    stride_ab, stride_bb, stride_cb,
    stride_bias, stride_rm, stride_rn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, SPLIT_MODE: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, INDEX_64: tl.constexpr,
    AK_UNIT: tl.constexpr, AM_UNIT: tl.constexpr,
    BK_UNIT: tl.constexpr, BN_UNIT: tl.constexpr, CN_UNIT: tl.constexpr,
    A_LEAD_DIV: tl.constexpr, B_LEAD_DIV: tl.constexpr, K_DIV: tl.constexpr,
    M_DIV: tl.constexpr, N_DIV: tl.constexpr,
    GPU_FENCE: tl.constexpr, MASK_M: tl.constexpr, MASK_N: tl.constexpr, KS_DIV: tl.constexpr,
    HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, RN_UNIT: tl.constexpr,
    SCALE: tl.constexpr, BATCHED: tl.constexpr,
    AB_DIV: tl.constexpr, BB_DIV: tl.constexpr, CB_DIV: tl.constexpr,
    C_LEAD_DIV: tl.constexpr, R_LEAD_DIV: tl.constexpr, INDEXED_K: tl.constexpr,
    FIX_SPLITS: tl.constexpr, FIX_CHUNK: tl.constexpr, FIX_SPIN: tl.constexpr, PREFETCH_B: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    if BATCHED:
        # bmm: one matrix product per program_id(2); each operand steps by its own batch stride
        # (0 for one matrix broadcast over the batch). In int64: batch x stride overflows int32
        # long before one matrix's offsets do (64 heads x 4096^2 bf16).
        pid_b = tl.program_id(2).to(tl.int64)
        off_a = pid_b * stride_ab
        off_b = pid_b * stride_bb
        off_c = pid_b * stride_cb
        # What each batch stride is a multiple of (batch_divisor): Triton's own specialisation
        # knows only multiples of 16 elements, and a batch stride of 8 x odd bf16 elements
        # (16-byte steps) left every matrix's alignment unknown: no cp.async pipeline at all
        # (an offline sm_90 compile of a 128x128x64 tile: tests/test_bmm.py).
        if AB_DIV > 1:
            off_a = tl.multiple_of(off_a, AB_DIV)
        if BB_DIV > 1:
            off_b = tl.multiple_of(off_b, BB_DIV)
        if CB_DIV > 1:
            off_c = tl.multiple_of(off_c, CB_DIV)
        a_ptr += off_a
        b_ptr += off_b
        c_ptr += off_c
    num_splits = tl.num_programs(1)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    # Grouped ordering: GROUP_M consecutive programs walk down a column of tiles,
    # so the B tiles they share stay in L2.
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = tl.minimum(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % width) % group_size
    pid_n = (pid % width) // group_size
    if _HAS_ASSUME and not PREFETCH_B:
        # Not with PREFETCH_B: there it cost B's prefetched scalar loads their immediate offsets
        # (tests/test_kernelinfo.py::test_prefetched_b_loads_share_a_base_with_immediate_offsets).
        # Both are >= 0 (so are pid, width and group_size), as Inductor's template tells the compiler
        # too. Without pid_n's, rn % N is a signed remainder and B's offsets signed, which changed how
        # the loop-invariant addresses were formed and, with them, ptxas's schedule of the K loop: the
        # next stage's 64-bit load addresses computed between the cp.async after the barrier
        # rather than before the wgmma, in 96 registers against the template's 112
        # (512x4096x4096 bf16, BM64-BN128-BK64-S4-W4, static + indexed, sm_90a, triton 3.6:
        # the 12 LDGSTS spanned 41 SASS instructions against 27; the same 95 a K iteration;
        # 1.004-1.083x the template on an H200). With it the loop's SASS is the template's,
        # instruction for instruction up to register names, in 112 registers
        # (scripts/exp_ptxas_order.py; scripts/parity_ir.py --indexed-k --order).
        tl.assume(pid_m >= 0)
        tl.assume(pid_n >= 0)

    # Unit strides as constexprs: the contiguous dim is known at compile time.
    if AK_UNIT:
        sak = 1
    else:
        sak = stride_ak
    if AM_UNIT:
        sam = 1
    else:
        sam = stride_am
    if BK_UNIT:
        sbk = 1
    else:
        sbk = stride_bk
    if BN_UNIT:
        sbn = 1
    else:
        sbn = stride_bn
    if CN_UNIT:
        scn = 1
    else:
        scn = stride_cn
    if RN_UNIT:
        srn = 1
    else:
        srn = stride_rn

    # Divisibility the JIT cannot see: Triton specialises integers on being multiples of
    # 16 *elements*, but a 16-byte vector needs only 8 bf16 elements, so a 1000-wide row
    # (2000 B, 16-byte aligned) would count as unaligned. A_LEAD_DIV / B_LEAD_DIV say what
    # the leading strides are multiples of; they are stated on the row-offset tensors below.

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows/cols past the edge wrap around, so loads need no M/N mask; stores are masked.
    # When the whole dim is smaller than its block (MASK_M / MASK_N, see edge_masks), the
    # wrap would make every program read the same few rows BLOCK/M times over; there the
    # loads are masked instead, so rows past the edge cost no memory traffic at all.
    if MASK_M:
        ram = rm
    else:
        ram = rm % M
    if MASK_N:
        rbn = rn
    else:
        rbn = rn % N
    # The wrap hides contiguity from Triton unless M/N are multiples of 16; when the
    # wrapped dim is the contiguous one, say how far it stays contiguous (groups of
    # M_DIV/N_DIV never straddle a wrap, since wraps fall on multiples of M/N).
    # Without it a 1000-wide row-major B loaded one element at a time: 1000^3 bf16
    # ran 53 us against cuBLAS's 7.7 on an H200.
    if AM_UNIT:
        if M_DIV > 1:
            if not MASK_M:
                ram = tl.max_contiguous(tl.multiple_of(ram, M_DIV), M_DIV)
    if BN_UNIT:
        if not MASK_N:
            if N_DIV > 1:
                rbn = tl.max_contiguous(tl.multiple_of(rbn, N_DIV), N_DIV)
            else:
                # An odd N, wrapped (edge='wrap', or launch_args.MASK_ODD_N off; 'auto' masks it):
                # the loads stay one element wide (the rows start 2-byte aligned, and without a
                # multiple_of the offsets' divisibility stays 1, so no vector can cross the wrap),
                # but without any contiguity Triton laid B's tile out with its threads down K
                # (order [0, 1]): a warp's load touched 32 rows, and each element's address took
                # 3 instructions in the K loop (777x1531x2048 bf16, sm_90a, triton 3.6: 412 SASS
                # instructions an iteration; 213 with this and the static indexed loop, as for
                # Inductor's template, which states BLOCK_N contiguity on its wrapped columns).
                # Timed against masking on an H200 in session 45: neither wins on every shape.
                rbn = tl.max_contiguous(rbn, BLOCK_N)
    k_start = pid_k * K_PER_SPLIT
    if KS_DIV > 1:
        # Where a K-slice starts is a multiple of this (0 with one slice): without it a K that
        # is not a multiple of 16 (Triton's own integer specialisation) left the start's
        # alignment unknown, so A's rows were loaded one element at a time and not pipelined
        # (1000^3 bf16 on an H200: 47 us against 11 us for Inductor's template, same config).
        k_start = tl.multiple_of(k_start, KS_DIV)
    k_end = tl.minimum(k_start + K_PER_SPLIT, K)
    if K_DIV > 1:
        # Lets the K mask stay constant over vector-width groups (see above).
        k_end = tl.multiple_of(k_end, K_DIV)
    rk = tl.arange(0, BLOCK_K)
    if INDEX_64:
        ram = ram.to(tl.int64)
        rbn = rbn.to(tl.int64)
        rk = rk.to(tl.int64)

    a_row_ok = rm[:, None] < M
    b_col_ok = rn[None, :] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if INDEXED_K:
        # One K-slice: the loop counts blocks from 0 and recomputes each block's offsets from
        # its index, as Inductor's template does, so that with K a constant (_tiled_mm_static)
        # the trip count is one too and ptxas can unroll.
        # k_end (= K here) carries K_DIV: with the raw K the K mask's constancy over vector
        # groups was lost and A's rows of 1000^3 bf16 compiled to scalar loads outside the
        # cp.async pipeline (sm_90a, triton 3.9).
        if PREFETCH_B:
            # B's tile for block ki + 1 is loaded into registers before block ki's product: B's rows
            # start 2-byte aligned (an odd N along a row-major B, wrapped), so its scalar loads cannot
            # go through cp.async and Triton pipelines only A; issued, stored and consumed in one
            # iteration, they waited on their own latency (96x50257x768 bf16, H200: 15 cycles a warp
            # an instruction on L1TEX against 5 for Inductor's template, which ran 1.18-1.31x faster;
            # a standalone kernel with the prefetch ran 0.87x the template, scripts/exp_prefetch_b.py).
            # The last iteration re-reads its own tile (in bounds, from L2) rather than a masked one.
            n_kb = tl.cdiv(K, BLOCK_K)
            # B's addresses as column pointers (loop-invariant) plus a row offset, not base plus one
            # int32 offset per element: with the sizes constant (_tiled_mm_static) each of a thread's
            # loads is then one 64-bit base an iteration plus an immediate, where the summed int32
            # offset cost an add and a 64-bit LEA pair per element (300x20001x512 fp16,
            # BM128-BN128-BK64-S3-W4, sm_90a, triton 3.6: 401 SASS instructions a K iteration
            # against 213 for scripts/exp_prefetch_b.py's kernel, which is written this way).
            # PREFETCH_B implies BN_UNIT and an odd N (B_LEAD_DIV 1), so _operand_offsets' hints
            # have nothing to add here.
            b_cols = b_ptr + rbn[None, :]
            b = _load_b(b_cols + rk[:, None] * sbk, b_col_ok, rk, k_end, EVEN_K, MASK_N)
            for ki in range(0, n_kb):
                kn = tl.minimum(ki + 1, n_kb - 1) * BLOCK_K
                b_next = _load_b(b_cols + (kn + rk)[:, None] * sbk, b_col_ok, rk, k_end - kn, EVEN_K, MASK_N)
                a_off = _operand_offsets(ram, rbn, ki * BLOCK_K + rk, sam, sak, sbk, sbn, A_LEAD_DIV,
                                         B_LEAD_DIV, AK_UNIT, BN_UNIT)[0]
                a = _load_a(a_ptr + a_off, a_row_ok, rk, k_end - ki * BLOCK_K, EVEN_K, MASK_M)
                acc = mma(a, b, acc, INPUT_PRECISION)
                b = b_next
        else:
            for ki in range(0, tl.cdiv(K, BLOCK_K)):
                kk = ki * BLOCK_K + rk
                a_off, b_off = _operand_offsets(ram, rbn, kk, sam, sak, sbk, sbn, A_LEAD_DIV, B_LEAD_DIV,
                                                AK_UNIT, BN_UNIT)
                a, b = _load_tiles(a_ptr + a_off, b_ptr + b_off, a_row_ok, b_col_ok, rk, k_end - ki * BLOCK_K,
                                   EVEN_K, MASK_M, MASK_N)
                acc = mma(a, b, acc, INPUT_PRECISION)
    else:
        # The loop carries integer offsets, not tensors of pointers: with scalar loads (an
        # unaligned operand) a 64x64 + 64x128 tile is 96 elements a thread, and 96 carried 64-bit
        # pointers took the kernel to 255 registers and 854 B of spills (333x4097x1025 bf16,
        # ptxas for sm_90a); Inductor's template recomputes its offsets and ran 4x faster there.
        a_off, b_off = _operand_offsets(ram, rbn, k_start + rk, sam, sak, sbk, sbn, A_LEAD_DIV, B_LEAD_DIV,
                                        AK_UNIT, BN_UNIT)
        for k in range(k_start, k_end, BLOCK_K):
            a, b = _load_tiles(a_ptr + a_off, b_ptr + b_off, a_row_ok, b_col_ok, rk, k_end - k, EVEN_K,
                               MASK_M, MASK_N)
            acc = mma(a, b, acc, INPUT_PRECISION)
            a_off += BLOCK_K * sak
            b_off += BLOCK_K * sbk

    # The store mask (and the residual's load mask) along N must be constant over each group of
    # C_LEAD_DIV (R_LEAD_DIV) columns for a 16-byte store (load): N is a multiple of both (the host,
    # launch_args.store_divisor), but Triton's specialisation only sees multiples of 16, so N = 1000
    # counted as unaligned. Rounding N down to that multiple changes nothing and lets it see so.
    if R_LEAD_DIV > C_LEAD_DIV:
        n_edge = (N // R_LEAD_DIV) * R_LEAD_DIV
    elif C_LEAD_DIV > 1:
        n_edge = (N // C_LEAD_DIV) * C_LEAD_DIV
    else:
        n_edge = N
    mask = (rm[:, None] < M) & (rn[None, :] < n_edge)
    if INDEX_64:
        rm_o = rm.to(tl.int64)
        rn_o = rn.to(tl.int64)
    else:
        rm_o = rm
        rn_o = rn
    split_epilogue(acc, c_ptr + pid_k * stride_cz, ws_ptr, lock_ptr, rm_o, rn_o, mask, stride_cm, scn,
                   M, N, pid, pid_k, 1, num_splits, SPLIT_MODE, GPU_FENCE, BLOCK_M, BLOCK_N,
                   bias_ptr, res_ptr, stride_bias, stride_rm, srn, HAS_BIAS, ACT, HAS_RES,
                   sa_ptr, sb_ptr, SCALE, C_LEAD_DIV, R_LEAD_DIV, FIX_SPLITS, FIX_CHUNK, FIX_SPIN)


# The same kernel with every size and stride a compile-time constant, as Inductor's template
# bakes them in: one compile per problem instead of per alignment class. An experiment on why
# Inductor's template runs faster than ours on small and unaligned shapes with the same config
# (benchmarks/results/2026-11-23-h200-parity: 1.2-1.3x on 333x4097x1025, 300x20001x512,
# 96x50257x768); launch_tiled(static=True) runs it.
@triton.jit
def _tiled_mm_static(
    a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, bias_ptr, res_ptr, sa_ptr, sb_ptr,
    M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, K_PER_SPLIT: tl.constexpr,
    stride_am: tl.constexpr, stride_ak: tl.constexpr, stride_bk: tl.constexpr, stride_bn: tl.constexpr,
    stride_cz: tl.constexpr, stride_cm: tl.constexpr, stride_cn: tl.constexpr,
    stride_ab: tl.constexpr, stride_bb: tl.constexpr, stride_cb: tl.constexpr,
    stride_bias: tl.constexpr, stride_rm: tl.constexpr, stride_rn: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, SPLIT_MODE: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, INDEX_64: tl.constexpr,
    AK_UNIT: tl.constexpr, AM_UNIT: tl.constexpr,
    BK_UNIT: tl.constexpr, BN_UNIT: tl.constexpr, CN_UNIT: tl.constexpr,
    A_LEAD_DIV: tl.constexpr, B_LEAD_DIV: tl.constexpr, K_DIV: tl.constexpr,
    M_DIV: tl.constexpr, N_DIV: tl.constexpr,
    GPU_FENCE: tl.constexpr, MASK_M: tl.constexpr, MASK_N: tl.constexpr, KS_DIV: tl.constexpr,
    HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, RN_UNIT: tl.constexpr,
    SCALE: tl.constexpr, BATCHED: tl.constexpr,
    AB_DIV: tl.constexpr, BB_DIV: tl.constexpr, CB_DIV: tl.constexpr,
    C_LEAD_DIV: tl.constexpr, R_LEAD_DIV: tl.constexpr, INDEXED_K: tl.constexpr,
    FIX_SPLITS: tl.constexpr, FIX_CHUNK: tl.constexpr, FIX_SPIN: tl.constexpr, PREFETCH_B: tl.constexpr,
):
    _tiled_mm_kernel(
        a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, bias_ptr, res_ptr, sa_ptr, sb_ptr,
        M, N, K, K_PER_SPLIT,
        stride_am, stride_ak, stride_bk, stride_bn, stride_cz, stride_cm, stride_cn,
        stride_ab, stride_bb, stride_cb, stride_bias, stride_rm, stride_rn,
        BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, SPLIT_MODE, INPUT_PRECISION, INDEX_64,
        AK_UNIT, AM_UNIT, BK_UNIT, BN_UNIT, CN_UNIT, A_LEAD_DIV, B_LEAD_DIV, K_DIV, M_DIV, N_DIV,
        GPU_FENCE, MASK_M, MASK_N, KS_DIV, HAS_BIAS, ACT, HAS_RES, RN_UNIT, SCALE, BATCHED,
        AB_DIV, BB_DIV, CB_DIV, C_LEAD_DIV, R_LEAD_DIV, INDEXED_K, FIX_SPLITS, FIX_CHUNK, FIX_SPIN,
        PREFETCH_B,
    )


# CUDA's grid axis 2 (a bmm's batch axis) holds at most this many programs (batch_chunks).
MAX_GRID_Z = 65535


def batch_chunks(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    """A bmm's operands in batch slices of at most MAX_GRID_Z matrices, one launch each (views)."""
    for s in range(0, c.shape[0], MAX_GRID_Z):
        yield a[s:s + MAX_GRID_Z], b[s:s + MAX_GRID_Z], c[s:s + MAX_GRID_Z]


_INTERPRETED = type(_tiled_mm_kernel).__name__ == "InterpretedFunction"
# Whether this process's Triton runs a grid's programs one after another (the CPU interpreter), so
# that SPLIT_MODE 3's programs must not wait for one another (the first would wait forever). Fixed
# at import, unlike _INTERPRETED, which tests switch off to exercise the GPU-only launch paths.
_PROGRAMS_IN_SEQUENCE = _INTERPRETED

# Compile-only mode (the tuner's parallel compile workers): launches compile the kernel
# (Triton's JITFunction.warmup) but put nothing on the GPU, so compiling ahead does not
# disturb the kernel being timed meanwhile on the same GPU. Anything warmup cannot do
# (the interpreter, another triton's API) falls back to an ordinary launch, except in strict
# mode ("strict": the operands are meta tensors with no memory behind them, which no kernel
# may ever run on), where it raises.
_COMPILE_ONLY: contextvars.ContextVar[bool | str] = contextvars.ContextVar("gemmtune_compile_only", default=False)


@contextlib.contextmanager
def compile_only(strict: bool = False):
    """Within this block, gemmtune's Triton launches only compile (see _COMPILE_ONLY);
    ``strict``: a launch that cannot just compile raises instead of running."""
    token = _COMPILE_ONLY.set("strict" if strict else True)
    try:
        yield
    finally:
        _COMPILE_ONLY.reset(token)


# Offline mode (gemmtune.kernelinfo): launches are recorded, not compiled or run, so that a
# choice's kernels can be compiled for any GPU target on a machine without one.
_OFFLINE: contextvars.ContextVar[list | None] = contextvars.ContextVar("gemmtune_offline", default=None)


@contextlib.contextmanager
def offline():
    """Within this block gemmtune's Triton launches only append ``(fn, grid, args, kwargs)`` to
    the yielded list (see _OFFLINE)."""
    launches: list = []
    token = _OFFLINE.set(launches)
    try:
        yield launches
    finally:
        _OFFLINE.reset(token)


def _launch(fn, grid, args, kwargs):
    recorded = _OFFLINE.get()
    if recorded is not None:
        recorded.append((fn, grid, args, kwargs))
        return None
    mode = _COMPILE_ONLY.get()
    if mode == "strict":
        if _INTERPRETED:
            raise RuntimeError("compile_only(strict=True): the CPU interpreter has nothing to compile")
        return fn.warmup(*args, grid=grid, **kwargs)
    if mode and not _INTERPRETED:
        try:
            return fn.warmup(*args, grid=grid, **kwargs)
        except Exception:  # noqa: BLE001 - a real compile error raises again just below
            pass
    return fn[grid](*args, **kwargs)


def input_precision(dtype: torch.dtype, allow_tf32: bool) -> str:
    # fp32 dot defaults to tf32 in Triton; with TF32 off, fp32's accuracy (fp32_precision says how).
    if dtype == torch.float32 and not allow_tf32:
        return fp32_precision()
    if dtype == torch.bfloat16 and _INTERPRETED:
        return UPCAST_BF16
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return FP8_PROMOTE
    return "tf32"


# The K loop's form with one K-slice (see the kernel's INDEXED_K): carried offsets (False) or
# offsets recomputed from the block index (True).
INDEXED_K_DEFAULT = False


def _tiled_args(a, b, c, *, block_m, block_n, block_k, group_m, k_per_split, split_mode=0, stride_cz=0,
                ws=None, locks=None, allow_tf32=False, edge="auto", epilogue=None, indexed_k=None):
    """(grid, runtime args, constexprs) of one launch of the tiled kernel. 3-D ``a``, ``b``, ``c``
    (batch, rows, cols): a bmm, one product per program_id(2) (BATCHED); everything about one
    matrix (strides, alignment hints, int64 offsets) is read from the first one."""
    batched = a.dim() == 3
    if batched:
        if epilogue is not None or split_mode != 0 or stride_cz:
            raise ValueError("the batched tiled kernel (bmm) runs one K-slice and no epilogue")
        batch_strides = (a.stride(0), b.stride(0), c.stride(0))
        batch = c.shape[0]
        a, b, c = a[0], b[0], c[0]
    else:
        batch_strides, batch = (0, 0, 0), 1
    M, K = a.shape
    N = b.shape[1]
    splits = cdiv(K, k_per_split)
    grid = (cdiv(M, block_m) * cdiv(N, block_n), splits) + ((batch,) if batched else ())
    am_unit = a.stride(1) != 1 and a.stride(0) == 1
    bn_unit = b.stride(1) == 1
    mask_m, mask_n = edge_masks(M, N, block_m, block_n, edge, m_contiguous=am_unit, n_contiguous=bn_unit)
    args = (a, b, c, c if ws is None else ws, c if locks is None else locks, *epilogue_pointers(epilogue, c),
            M, N, K, k_per_split,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), stride_cz, c.stride(-2), c.stride(-1),
            *batch_strides, *epilogue_strides(epilogue))
    consts = dict(
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
        EVEN_K=K % block_k == 0 and k_per_split % block_k == 0, SPLIT_MODE=split_mode,
        INPUT_PRECISION=input_precision(a.dtype, allow_tf32),
        INDEX_64=needs_int64(a, b, c, *epilogue_tensors(epilogue)) or (ws is not None and needs_int64(ws)),
        AK_UNIT=a.stride(1) == 1, AM_UNIT=am_unit,
        BK_UNIT=b.stride(1) != 1 and b.stride(0) == 1, BN_UNIT=bn_unit,
        CN_UNIT=c.stride(-1) == 1,
        A_LEAD_DIV=lead_divisor(a), B_LEAD_DIV=lead_divisor(b),
        K_DIV=_pow2_divisor(math.gcd(K, k_per_split)),
        # Only read where that dim is contiguous and wrapped (see the kernel): elsewhere they are
        # pinned to 1, so that problems differing only in M (or N) share one compiled kernel
        # instead of one per power-of-two divisor (dispatch over runtime M, bulk collection).
        M_DIV=min(_pow2_divisor(M), block_m) if am_unit and not mask_m else 1,
        N_DIV=min(_pow2_divisor(N), block_n) if bn_unit and not mask_n else 1,
        GPU_FENCE=split_mode != 0 and not _INTERPRETED, MASK_M=mask_m, MASK_N=mask_n,
        KS_DIV=16 if splits == 1 else _pow2_divisor(k_per_split),
        **epilogue_consts(epilogue), BATCHED=batched,
        AB_DIV=batch_divisor(batch_strides[0]) if batched else 1,
        BB_DIV=batch_divisor(batch_strides[1]) if batched else 1,
        CB_DIV=batch_divisor(batch_strides[2]) if batched else 1,
        # The output's (and the residual's) row offsets and N, for 16-byte stores (loads). Read only
        # with unit-stride rows (CN_UNIT / RN_UNIT); otherwise 1. For a contiguous output both are
        # N's divisor, so this adds no compiled variants beyond N's own power-of-two class.
        C_LEAD_DIV=store_divisor(c, N),
        R_LEAD_DIV=1 if epilogue is None or epilogue.residual is None else store_divisor(epilogue.residual, N),
        # Only with one K-slice (the index loop starts at 0 and runs to K).
        INDEXED_K=splits == 1 and (INDEXED_K_DEFAULT if indexed_k is None else bool(indexed_k)),
        **fixup_blocks(split_mode, splits, block_m * block_n),
    )
    # B's next tile prefetched into registers (the kernel says why): in the indexed loop, where an
    # odd N along a row-major B is wrapped (its rows 2-byte aligned: scalar loads, no cp.async).
    consts["PREFETCH_B"] = bool(consts["INDEXED_K"] and bn_unit and not mask_n and N % 2 == 1
                                and lead_divisor(b) == 1 and not batched)
    return grid, args, consts


# SPLIT_MODE 3's sum (tile_epilogue.parallel_fixup) loads [FIX_SPLITS, FIX_CHUNK] partials at once:
# about this many fp32 values per program, 32 a thread at 4 warps.
FIXUP_ELEMENTS = 4096


def fixup_blocks(split_mode: int, splits: int, tile_elems: int) -> dict:
    """FIX_SPLITS (the split count rounded up to a power of two), FIX_CHUNK (elements of the
    tile summed per load) and FIX_SPIN (whether the programs wait for one another) of a
    SPLIT_MODE 3 launch; 1, 1, False otherwise, so that the other modes compile as before.

    >>> fixup_blocks(2, 32, 4096)
    {'FIX_SPLITS': 1, 'FIX_CHUNK': 1, 'FIX_SPIN': False}
    >>> [{k: v for k, v in fixup_blocks(3, s, e).items() if k != "FIX_SPIN"} for s, e in ((32, 4096), (100, 16384))]
    [{'FIX_SPLITS': 32, 'FIX_CHUNK': 128}, {'FIX_SPLITS': 128, 'FIX_CHUNK': 32}]
    """
    if split_mode != 3:
        return {"FIX_SPLITS": 1, "FIX_CHUNK": 1, "FIX_SPIN": False}
    fs = 1 << max(0, splits - 1).bit_length()
    return {"FIX_SPLITS": fs, "FIX_CHUNK": max(1, min(tile_elems, FIXUP_ELEMENTS // fs)),
            "FIX_SPIN": not _PROGRAMS_IN_SEQUENCE}


def launch_options(split_mode: int) -> dict:
    """Launch options beyond the constexprs: SPLIT_MODE 3 spins until the tile's programs have all
    stored their partials, so its grid must be resident at once: a cooperative launch, which
    fails with an error instead of hanging when the grid cannot be."""
    return {"launch_cooperative_grid": True} if split_mode == 3 and not _INTERPRETED else {}


def launch_tiled(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    *,
    block_m: int,
    block_n: int,
    block_k: int,
    group_m: int,
    num_stages: int,
    num_warps: int,
    k_per_split: int,
    split_mode: int = 0,
    stride_cz: int = 0,
    ws: torch.Tensor | None = None,
    locks: torch.Tensor | None = None,
    allow_tf32: bool = False,
    edge: str = "auto",
    epilogue: EpilogueArgs | None = None,
    static: bool = False,
    indexed_k: bool | None = None,
):
    """Launch the tiled kernel; the caller has validated shapes and sizes (M, N, K > 0) and the
    epilogue (gemmtune.epilogue.bind). Returns what Triton's launch returns (the compiled
    kernel on a GPU). ``static``: sizes and strides compiled in as constants (_tiled_mm_static).
    ``indexed_k``: with one K-slice, the K loop indexed from 0 (INDEXED_K) rather than carrying
    offsets; None takes INDEXED_K_DEFAULT."""
    grid, args, consts = _tiled_args(a, b, c, block_m=block_m, block_n=block_n, block_k=block_k,
                                     group_m=group_m, k_per_split=k_per_split, split_mode=split_mode,
                                     stride_cz=stride_cz, ws=ws, locks=locks, allow_tf32=allow_tf32,
                                     edge=edge, epilogue=epilogue, indexed_k=indexed_k)
    fn, args, consts = _static(args, consts) if static else (_tiled_mm_kernel, args, consts)
    return _launch(fn, grid, args, {**consts, "num_warps": num_warps, "num_stages": num_stages,
                                    **launch_options(split_mode)})


def _static(args: tuple, consts: dict) -> tuple:
    """(_tiled_mm_static, its runtime args: the pointers, its constexprs: the sizes and strides
    of ``args`` too) for one launch of the tiled kernel's ``args`` and ``consts``."""
    names = _tiled_mm_static.arg_names[N_POINTERS:len(args)]
    return _tiled_mm_static, args[:N_POINTERS], {**dict(zip(names, args[N_POINTERS:])), **consts}


def tile_kwargs(cfg, allow_tf32: bool) -> dict:
    """The launch_tiled / prepare_direct keywords a tile config (TileConfig, SplitKConfig) sets."""
    return {"block_m": cfg.block_m, "block_n": cfg.block_n, "block_k": cfg.block_k, "group_m": cfg.group_m,
            "num_stages": cfg.num_stages, "num_warps": cfg.num_warps, "allow_tf32": allow_tf32}


def prepare_direct(a, b, c, *, num_stages, num_warps, ws=None, locks=None, epilogue=None, static=False, **kw):
    """A launcher for repeated launches at this exact problem: ``fn(a, b, c, ws, locks, epilogue)``.

    Triton's own launch path binds and specialises every argument on every call (tens
    of microseconds of Python for this kernel's 37 parameters). Once one launch has
    returned the compiled kernel, the only things that can change between calls of
    one problem are the data pointers; sizes, strides, constexprs and the 16-byte
    alignment Triton specialised on are fixed. The launcher returned here passes the
    pointers plus the frozen rest straight to the compiled kernel. It is only valid
    while the operands (and the epilogue's bias and residual) keep the strides and
    alignment of the ones given here: the caller checks that (``Direct.matches``) and
    uses ``launch_tiled`` otherwise.
    Returns None in the interpreter (no compiled kernel) or when Triton returned none.
    """
    if _INTERPRETED or (a.dim() == 3 and c.shape[0] > MAX_GRID_Z):  # (a batch over one grid: several launches)
        return None
    grid, args, consts = _tiled_args(a, b, c, ws=ws, locks=locks, epilogue=epilogue, **kw)
    fn, args, consts = _static(args, consts) if static else (_tiled_mm_kernel, args, consts)
    kernel = fn[grid](*args, **consts, num_warps=num_warps, num_stages=num_stages,
                      **launch_options(kw.get("split_mode", 0)))
    d = direct(fn, kernel, grid, args, consts, a, b, ws, epilogue)
    if d is not None and static:
        d.shapes = (a.shape, b.shape)  # sizes are compiled in too
    return d


def direct(fn, kernel, grid, args, consts, a, b, ws, epilogue) -> "Direct | None":
    """The Direct launch of ``kernel``, the compiled ``fn`` that one ordinary launch with
    ``args`` and ``consts`` returned; None when there is no compiled kernel or its
    parameters are not the args (pointers first, N_POINTERS of them) then the constexprs."""
    compiled = runner_and_args(fn, kernel, grid, args, consts)
    if compiled is None:
        return None
    runner, full = compiled
    return Direct(runner, tuple(full[N_POINTERS:]), a, b, ws, epilogue)


class Direct:
    """A prepared launch (see ``prepare_direct``)."""

    __slots__ = ("runner", "fixed", "strides", "align", "ws_max", "epi", "shapes")

    def __init__(self, runner, fixed, a, b, ws, epilogue=None):
        self.runner, self.fixed = runner, fixed
        self.strides = (a.stride(), b.stride())
        self.align = (a.data_ptr() % 16, b.data_ptr() % 16)
        # A workspace only grows; past int32 offsets the kernel needs INDEX_64 recompiled.
        self.ws_max = _INT32_LIMIT if ws is not None and not needs_int64(ws) else math.inf
        self.epi = epilogue_key(epilogue)
        self.shapes = None  # set for a static kernel, whose sizes are compiled in

    def matches(self, a, b, ws=None, epilogue=None) -> bool:
        """Whether ``a``, ``b`` (``ws`` and ``epilogue``) fit what this launch was specialised on."""
        return ((a.stride(), b.stride()) == self.strides
                and (a.data_ptr() % 16, b.data_ptr() % 16) == self.align
                and (self.shapes is None or (a.shape, b.shape) == self.shapes)
                and (ws is None or ws.numel() <= self.ws_max)
                and (self.epi is None if epilogue is None else epilogue_key(epilogue) == self.epi))

    def __call__(self, a, b, c, ws=None, locks=None, epilogue=None) -> None:
        # Written out for the plain mm (no helper call on the hot path); c fills absent slots.
        if epilogue is None:
            self.runner(a, b, c, c if ws is None else ws, c if locks is None else locks, c, c, c, c, *self.fixed)
        else:
            self.runner(a, b, c, c if ws is None else ws, c if locks is None else locks,
                        *epilogue_pointers(epilogue, c), *self.fixed)


def sum_blocks(S: int, MN: int, sms: int | None) -> tuple[int, int]:
    """(BLOCK, BLOCK_S) of the sum kernel over ``S`` fp32 planes of ``MN`` outputs: outputs per
    program, and slices each program loads at once.

    One program per 1024 outputs, adding the S slices one after another, left the GPU idle where
    the output is small and S large: on 32x32x28672 bf16 (H100, session 23 call 7) DecomposeK's sum
    over 112 planes of 1024 outputs ran in one program, and the whole choice took 18.5 us where
    Inductor's DecomposeK, which spreads the same sum over many programs, took 5.9. So the outputs
    are dealt to about one program per SM (at least 32 a program: a 128-byte row of each slice),
    and each program loads up to 16 slices at a time, 4096 values a program at most (32 fp32
    registers a thread at 4 warps).

    >>> sum_blocks(112, 32 * 32, 132), sum_blocks(16, 512 * 512, 132), sum_blocks(4, 1 << 20, None)
    ((32, 16), (1024, 4), (1024, 4))
    """
    per_sm = max(1, MN // max(sms or 1, 1))
    block = min(1024, max(32, 1 << (per_sm.bit_length() - 1)))
    block_s = max(1, min(16, next_pow2(S), 4096 // block))
    return block, block_s


def _sum_args(ws: torch.Tensor, out: torch.Tensor, epilogue: EpilogueArgs | None) -> tuple:
    """(grid, args, constexprs) of the sum kernel over ``ws`` into ``out``."""
    S, M, N = ws.shape
    block, block_s = sum_blocks(S, M * N, gpu_sm_count(ws.device))
    args = (ws, out, *epilogue_pointers(epilogue, out), M * N, N, S, out.stride(0), out.stride(1),
            *epilogue_strides(epilogue))
    consts = {"BLOCK": block, "BLOCK_S": block_s, "INDEX_64": needs_int64(out, *epilogue_tensors(epilogue)),
              **(epilogue.spec if epilogue is not None else NONE).constexprs()}
    return (cdiv(M * N, block),), args, consts


SUM_WARPS = 4
SUM_POINTERS = 6  # the sum kernel's pointer parameters: ws, out, bias, residual, scale_a, scale_b


def launch_sum_splits(ws: torch.Tensor, out: torch.Tensor, epilogue: EpilogueArgs | None = None):
    """out = epilogue(sum of the fp32 partials ``ws`` [S, M, N]); blocks from ``sum_blocks``.
    Returns what Triton's launch returns (the compiled kernel on a GPU)."""
    grid, args, consts = _sum_args(ws, out, epilogue)
    return _launch(_sum_splits_kernel, grid, args, {**consts, "num_warps": SUM_WARPS})


def prepare_sum_splits(ws: torch.Tensor, out: torch.Tensor, epilogue: EpilogueArgs | None = None):
    """Sum once (as ``launch_sum_splits``) and return the ``Relaunch`` of that compiled sum, called
    as ``launch(ws, out, *epilogue_pointers(epilogue, out))`` with partials and an output of the
    same shape, strides and alignment (and an epilogue of the same ``epilogue_key``); None in the
    interpreter."""
    grid, args, consts = _sum_args(ws, out, epilogue)
    kernel = _launch(_sum_splits_kernel, grid, args, {**consts, "num_warps": SUM_WARPS})
    return relaunch(_sum_splits_kernel, kernel, grid, args, consts, slots=range(SUM_POINTERS))
