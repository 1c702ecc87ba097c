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

With a K-contiguous B (a Linear's weight) and M <= 8, the default space also holds GEMV strips
(``skinny_spec._DEFAULT_GEMV``): the CUDA-core path with BLOCK_N = 2 or 4 and BLOCK_K up to 2048.
A program then reads whole rows of W, and a layer of N outputs runs N / 2 or N / 4 programs.
Below about 30 MB of weight every load has to be in flight at once on every SM, and a split's sum
costs more than it gains (skinny_spec says what was measured), so the strips run unsplit wherever
N / BLOCK_N fills the GPU; on a narrower layer the space adds their K splits too
(``skinny_spec.splits_for``: 1 x 512 x 2048 on an H200 gets SK2, N = 128 up to SK8).

At M = 1 a strip runs one of three layouts of its product (``SkinnyConfig.flat`` and
``sum_each``). The 3-D one, ``[1, BN, BK]``, broadcasts the A row into it through shared memory,
which puts 4-10 barriers inside the K loop of the BN4 strips (SASS for sm_90). ``-flat`` holds a
2-D ``[BN, BK]`` tile and A as one ``[BK]`` vector, with no barrier in the loop. ``-flat-sum`` sums
that tile over K at every step, so it holds one fp32 a column: 64 registers at BN4-BK1024-W2, where
``-flat`` holds 131 and the 3-D strip 153; where K spans warps, that sum goes through shared
memory, with barriers in the loop again. On an H200 (sessions 39-40, benchmarks/results/
2026-11-29-h200-s39 and -s40) each layout won somewhere:
- at BN4-BK512-W2 the 3-D strip beat a plain 2-D kernel (1 x 3072 x 2048: 6.3 against 8.3 us);
- over 12 decode GEMVs a -flat or -flat-sum strip was the best of 129-237 on 11 (s40 call 3; 1 x 16384 x 2048:
  18.2 us with -flat-sum, against 20.1 for the default space's best 3-D strip; cuBLAS 18.5).
At M = 1 on 16-bit operands the default space's GEMV tiles are -flat strips
(``skinny_spec.one_row_tiles``); elsewhere they are 3-D. ``-flat-sum`` also runs BLOCK_M = 2-8
rows a program (``_flat_rows``): B's tile is loaded once a step and each row of A is multiplied
into it in turn, 54 registers at BM4-BN2-BK1024-W4 where the 3-D strip holds 128 (sm_90). No
space offers it: on an H200 (session 41, benchmarks/results/2026-11-30-h200-s41, call 2) it was the
best strip on 2 of 12 decode GEMVs at M = 2 and on none at M = 4, where 16-row dot strips won.

A strip can also be launched with programmatic dependent launch (``-pdl`` configs, Hopper and
later, one K-slice; every path: tl.dot and both CUDA-core layouts). It starts while the kernel
before it is still running, loads its first B tile, and only then waits (``gdc_wait``) to read A. At decode, B is a weight that no kernel of
the step writes, so its first bytes stream while the kernel before finishes.
``scripts/exp_pdl.py`` measured this on an H200 (benchmarks/results/2026-11-29-h200-s36, calls
6-8): a CUDA graph of 32 norm -> GEMV pairs on Llama-1B's MLP shapes.

| BLOCK_N x BLOCK_K | plain, µs | with PDL + prefetch, µs | the norm knows no PDL, µs |
|---|---:|---:|---:|
| 4 x 2048 | 532 | 371 | 411 |
| 2 x 2048 | 428 | 372 | 412 |

cuBLAS took 460 µs on the same chain, so the prefetch variant ran at 1.24x cuBLAS. When the norm
knows no PDL (ATen's kernels, and Inductor's without ``TORCHINDUCTOR_ENABLE_PDL=1``), it ran at
1.12x cuBLAS.

No space offers these configs: a choice id reaches them (``...-core-det-pdl``), and ``pdl=True``
(gemmtune.pdl) serves the twins of tuned GEMV strips on a K-contiguous B in graphs compiled with
Inductor's PDL on, the path measured in a model (session 37: 1.025-1.061x a compiled Llama-1B decode step, with Inductor's PDL on). The
tuner cannot rank them: it times a config by replaying the same kernel back to back, so with PDL
each launch overlaps the one before, and that tells nothing of the kernels a model puts before
it. The tl.dot and N-contiguous paths peel their first step the same way (session 37, CPU
only); their gain is not measured yet, so ``pdl=True`` does not twin them.

A one-row -flat strip can also fold the RMSNorm before it (``run(..., norm_weight=g, norm_eps=e)``,
``_skinny_fold_kernel``): each program already reads its whole row x, so it multiplies x by g as
it loads it, sums x^2 over the row after its K loop, and scales its sums by rsqrt(mean(x^2) + e);
the norm kernel before a decode step's q/k/v or gate/up GEMV goes. A launch-time input, not a
config: the tuned strip is reused as it is, and without ``norm_weight`` or ``norm_eps`` the launch
is the plain one. gemmtune.normfold serves it (opt-in). With x^2 summed inside the loop (session
42's version) it ran 1.1-1.6x the plain strip's time on the H200 and made Llama-1B's decode step
slower (benchmarks/results/2026-11-30-h200-s43, section 2); with the sum after the loop
(``_rms_scale``) it runs 1.06-1.44x the plain strip's time, and the step is within noise of the
unfolded one (benchmarks/results/2026-11-30-h200-s44, sections 1-2).

The K-slices are reduced by the fused split-K epilogue that the tiled kernel uses
(``tiled.split_epilogue``): partials in an fp32 workspace, the last program to arrive
at a strip sums them (in slice order when ``deterministic``), so it stays one launch.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ..configs import SkinnyConfig
from ..problem import Problem
from .base import Unsupported
from .splitk import SplitKWorkspace
from ..epilogue import EpilogueArgs
from .launch_args import N_POINTERS
from .tiled import (_INTERPRETED, _launch, _pow2_divisor, direct, epilogue_consts, epilogue_pointers,
                    epilogue_strides, epilogue_tensors, input_precision, lead_divisor, mma, needs_int64,
                    split_epilogue)
# The family's pure part (configs, space, constraint, launch plan, model row): kept in skinny_spec so that
# planning imports no Triton (kernels.spec); the family's names as before.
from .skinny_spec import (  # noqa: F401
    BMM_WHY, CONFIG, MAX_CORE_REGS, MAX_M, MAX_WORKSPACE_BYTES, MIN_SLICE, NAME, PDL_MISFIT_WHY, SPLITS,
    _DEFAULT_CORE, _DEFAULT_DOT, constraint, core_regs, features_row, fold_misfit, k_per_split, pdl_misfit,
    plan, space, splits_for, validate)


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
    SCALE: tl.constexpr, PREFETCH: tl.constexpr = False, GDC: tl.constexpr = False, FLAT: tl.constexpr = False,
    SUM_EACH: tl.constexpr = False,
):
    # Unit strides as constexprs, so that the contiguous dim is known at compile time. What
    # the leading strides are multiples of (A_LEAD_DIV / B_LEAD_DIV) is stated on the offset
    # tensors (``_lead``): a multiple_of on the scalar stride does not reach Triton's
    # alignment analysis (see tiled.py).
    sak, sbk, sbn, srn = _unit_strides(stride_ak, stride_bk, stride_bn, stride_rn, AK_UNIT, BK_UNIT, BN_UNIT, RN_UNIT)
    sam = stride_am

    if STREAM:
        _stream_k(a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K, sam, sak, sbk, sbn, stride_cm, stride_cn,
                  BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, INPUT_PRECISION, INDEX_64, GPU_FENCE,
                  AK_UNIT, BN_UNIT, A_LEAD_DIV, B_LEAD_DIV,
                  bias_ptr, res_ptr, stride_bias, stride_rm, srn, HAS_BIAS, ACT, HAS_RES, sa_ptr, sb_ptr, SCALE)
    else:
        _strip(a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K, K_PER_SPLIT, sam, sak, sbk, sbn,
               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, DOT, SPLIT_MODE, EVEN_K, INPUT_PRECISION,
               INDEX_64, BK_UNIT, K_DIV, GPU_FENCE, AK_UNIT, BN_UNIT, A_LEAD_DIV, B_LEAD_DIV, KS_DIV,
               bias_ptr, res_ptr, stride_bias, stride_rm, srn, HAS_BIAS, ACT, HAS_RES, sa_ptr, sb_ptr, SCALE,
               PREFETCH, GDC, FLAT, SUM_EACH, a_ptr, 0, 0.0, False)  # (no norm fold: _skinny_fold_kernel)


@triton.jit
def _skinny_fold_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, bias_ptr, res_ptr, sa_ptr, sb_ptr, g_ptr,
    M, N, K, K_PER_SPLIT,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_bias, stride_rm, stride_rn, stride_g, norm_eps,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    DOT: tl.constexpr, SPLIT_MODE: tl.constexpr, EVEN_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, INDEX_64: tl.constexpr,
    AK_UNIT: tl.constexpr, BK_UNIT: tl.constexpr, BN_UNIT: tl.constexpr,
    A_LEAD_DIV: tl.constexpr, B_LEAD_DIV: tl.constexpr, K_DIV: tl.constexpr,
    GPU_FENCE: tl.constexpr, KS_DIV: tl.constexpr,
    HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, RN_UNIT: tl.constexpr,
    SCALE: tl.constexpr, PREFETCH: tl.constexpr = False, GDC: tl.constexpr = False, FLAT: tl.constexpr = False,
    SUM_EACH: tl.constexpr = False, NORM_MODE: tl.constexpr = 1,
):
    """The one-row -flat strip with an RMSNorm folded in (``run(..., norm_weight=g, norm_eps=e)``):
    out = (rmsnorm(x) * g) @ B = rsqrt(mean(x^2) + e) * ((x * g) @ B), per row x of A. NORM_MODE 2
    (``run(..., norm_eps=e)`` alone) is a unit-weight norm, for a B that holds g already (diag(g) @ B):
    the same strip without g's loads.

    A kernel of its own, not a switch of ``_skinny_kernel``: that one keeps its parameters, so its
    prepared launches (tiled.direct freezes the argument list) and its code stay as they were.
    The strip is ``_strip``'s -flat path with NORM on; the launcher (``check_fold``) admits only
    what that path computes right: BLOCK_M = 1, -flat or -flat-sum, one K-slice.

    Rounding, against Hugging Face's LlamaRMSNorm then the Linear: HF computes x in fp32, scales it
    by rsqrt(var + eps), rounds that to the input dtype, multiplies by the weight in the input dtype
    (a second rounding), and the GEMM reads the result. Here x * g is formed in fp32 (exact for
    16-bit x and g), the GEMM sums it against W in fp32, and the scale multiplies those fp32 sums:
    one rounding, the output's, where HF has two 16-bit roundings of the GEMM's input. The two agree
    to the input dtype's precision, not bitwise; the sum of squares runs in a different order (a
    [BK] vector over the row's steps, then summed) from torch's mean, which moves the scale by a few
    fp32 ulps. tl.math.rsqrt is the GPU's approximate reciprocal square root, as torch.rsqrt's is.

    Session 42's version summed x^2 inside the K loop. On the H200 (session 43, triton 3.6,
    scripts/exp_fold_ncu.py) it ran 1.12-1.58x the plain strip's time on Llama-1B's 3072x2048 and
    16384x2048: registers 38 -> 48, 56 -> 72 and 49 -> 80, achieved occupancy down by 9-16 points,
    DRAM throughput 68% -> 47% at 16384x2048 BN2-BK1024. Summed after the loop (``_rms_scale``),
    compiled for sm_90 on a CPU (kernelinfo's compile, triton 3.6, bf16; no spills), the same
    strips keep 40, 64 and 64 registers (38, 56 and 49 plain), the unit-weight ones 39, 64 and 48,
    as Nsight Compute found on the H200; they run 1.06-1.44x the plain strip's time there
    (benchmarks/results/2026-11-30-h200-s44, section 1)."""
    sak, sbk, sbn, srn = _unit_strides(stride_ak, stride_bk, stride_bn, stride_rn, AK_UNIT, BK_UNIT, BN_UNIT, RN_UNIT)
    _strip(a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K, K_PER_SPLIT, stride_am, sak, sbk, sbn,
           stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, DOT, SPLIT_MODE, EVEN_K, INPUT_PRECISION,
           INDEX_64, BK_UNIT, K_DIV, GPU_FENCE, AK_UNIT, BN_UNIT, A_LEAD_DIV, B_LEAD_DIV, KS_DIV,
           bias_ptr, res_ptr, stride_bias, stride_rm, srn, HAS_BIAS, ACT, HAS_RES, sa_ptr, sb_ptr, SCALE,
           PREFETCH, GDC, FLAT, SUM_EACH, g_ptr, stride_g, norm_eps, NORM_MODE)


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
def _flat_step(prod, a, b, BK_UNIT: tl.constexpr, SUM_EACH: tl.constexpr):
    """One K step of the -flat product: A's [BK] vector (fp32) times B's tile, added to ``prod``,
    or with SUM_EACH summed over K first (``prod`` is then [BN]). One return, after both
    branches: Triton's compiler goes on past a return inside a constexpr ``if``."""
    if BK_UNIT:
        t = a[None, :] * b.to(tl.float32)  # [BN, BK]
        if SUM_EACH:
            out = prod + tl.sum(t, axis=1)
        else:
            out = prod + t
    else:
        t = a[:, None] * b.to(tl.float32)  # [BK, BN]
        if SUM_EACH:
            out = prod + tl.sum(t, axis=0)
        else:
            out = prod + t
    return out


@triton.jit
def _unit_strides(stride_ak, stride_bk, stride_bn, stride_rn, AK_UNIT: tl.constexpr, BK_UNIT: tl.constexpr,
                  BN_UNIT: tl.constexpr, RN_UNIT: tl.constexpr):
    """(A's K stride, B's K and N strides, the residual's N stride), each a literal 1 where its
    *_UNIT says so: the contiguous dims known at compile time. Both kernels' lines: their PTX for
    sm_90 (triton 3.6) is the same, line info aside, as with these lines inline in each (session 43,
    offline compiles of six configs with and without a residual, 15 kernels)."""
    if AK_UNIT:
        sak = 1
    else:
        sak = stride_ak
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
    return sak, sbk, sbn, srn


@triton.jit
def _times_g(a, g_ptrs, k_ok, MASK_K: tl.constexpr):
    """The norm fold's share of one K step: ``a`` is x's [BK] vector as loaded (fp32, zeros past K);
    returns x * g, the product's A. g is loaded in its own dtype and widened, so for 16-bit x and g
    the product is exact in fp32 (11 + 11 significand bits, or 8 + 8, within 24)."""
    if MASK_K:
        g = tl.load(g_ptrs, mask=k_ok, other=0.0)
    else:
        g = tl.load(g_ptrs)
    return a * g.to(tl.float32)


@triton.jit
def _rms_scale(a_vec, rk, k_start, k_end, sak, K, norm_eps, BLOCK_K: tl.constexpr):
    """rsqrt(mean(x^2) + eps) of the row x at ``a_vec`` (its [BK] pointers at ``k_start``), read
    again after the product's loop: the squares of x itself, RMSNorm's statistic of its input.

    After the loop, not in it: summed in the loop, x^2 was a [BK] fp32 vector live across every
    step, and it cost the strip 10-31 registers (sm_90, triton 3.6: 38 -> 48 at BN2-BK1024-W4,
    56 -> 72 at BN8-BK512, 49 -> 80 at BN2-BK2048), so resident warps; the fold ran 1.12-1.58x the
    plain strip's time on the H200 (benchmarks/results/2026-11-30-h200-s43, section 2). Read again
    here, from L1 or L2 (the loop has just read it), the strip keeps 40 / 64 / 64 (offline compile,
    session 43). The sum runs in the same order as before: a [BK] vector over the steps, then
    summed."""
    ss = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k in range(k_start, k_end, BLOCK_K):
        x = tl.load(a_vec, mask=rk < k_end - k, other=0.0).to(tl.float32)
        ss += x * x
        a_vec += BLOCK_K * sak
    return tl.math.rsqrt(tl.sum(ss, axis=0) / K + norm_eps)


@triton.jit
def _flat_load_b(b_ptrs, n_ok, k_ok, BK_UNIT: tl.constexpr, MASK_K: tl.constexpr):
    """A -flat strip's B tile ([BN, BK] on a K-contiguous B, else [BK, BN]), masked past N and,
    with MASK_K, by ``k_ok`` (a ragged last K step)."""
    if BK_UNIT:
        if MASK_K:
            b = tl.load(b_ptrs, mask=n_ok[:, None] & k_ok[None, :], other=0.0)
        else:
            b = tl.load(b_ptrs, mask=n_ok[:, None], other=0.0)
    else:
        if MASK_K:
            b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        else:
            b = tl.load(b_ptrs, mask=n_ok[None, :], other=0.0)
    return b


@triton.jit
def _flat_first_b(b_ptrs, n_ok, k0_ok, BK_UNIT: tl.constexpr, GDC: tl.constexpr):
    """A -flat strip's peeled first step (a ``-pdl`` config): B's tile, loaded before the wait for
    the kernel launched before it; then the wait (GDC: on a GPU launched with PDL)."""
    b0 = _flat_load_b(b_ptrs, n_ok, k0_ok, BK_UNIT, True)
    if GDC:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    return b0


@triton.jit
def _flat_ptrs(a_ptr, b_ptr, row0, rn_i, rk, k_start, sam, sak, sbk, sbn, INDEX_64: tl.constexpr,
               BK_UNIT: tl.constexpr):
    """(A's pointer to row ``row0`` at the slice's first K, B's tile pointers there): a scalar base
    plus a row's offset, then the K (or N) range, so each 16-byte chunk of a row is an immediate
    off that row's pointer in the SASS (scripts/sessions/s41_flat_pointers.patch says why)."""
    if INDEX_64:
        ks = k_start.to(tl.int64)
        a_base = a_ptr + row0.to(tl.int64) * sam + ks * sak
        b_base = b_ptr + ks * sbk
    else:
        a_base = a_ptr + row0 * sam + k_start * sak
        b_base = b_ptr + k_start * sbk
    if BK_UNIT:
        b_ptrs = (b_base + rn_i[:, None] * sbn) + rk[None, :]  # [BN, BK] (sbk is 1)
    else:
        b_ptrs = (b_base + rk[:, None] * sbk) + rn_i[None, :] * sbn  # [BK, BN]
    return a_base, b_ptrs


@triton.jit
def _flat_rows_step(acc, a_base, b, offs, k_ok, row0, M, sam, sak, BLOCK_M: tl.constexpr, BK_UNIT: tl.constexpr):
    """One K step of the multi-row -flat-sum product: each of BLOCK_M rows of A (a [BK] vector at
    ``a_base`` + row x sam + offs x sak, masked past M and by ``k_ok``) times B's tile ``b``,
    summed over K into that row's column of ``acc`` ([BN, BM]: a row's [BN] sum lands in the
    layout the tile's reduction gives it)."""
    cols = tl.arange(0, BLOCK_M)
    bf = b.to(tl.float32)
    for i in tl.static_range(BLOCK_M):
        # the row's bound as a [BK] tensor: a scalar predicate and'ed into a tensor mask is refused
        # by the interpreter ("mask has unsupported dtype", triton 3.9); compiled, it folds away
        row_ok = (tl.zeros_like(k_ok.to(tl.int32)) + (row0 + i)) < M
        a = tl.load(a_base + i * sam + offs * sak, mask=k_ok & row_ok, other=0.0).to(tl.float32)
        if BK_UNIT:
            part = tl.sum(bf * a[None, :], axis=1)  # [BN]
        else:
            part = tl.sum(bf * a[:, None], axis=0)
        acc = tl.where(cols[None, :] == i, acc + part[:, None], acc)
    return acc


@triton.jit
def _flat_rows(a_ptr, b_ptr, pid_m, rn_i, rk, n_ok, k_start, k_end, M, sam, sak, sbk, sbn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
               INDEX_64: tl.constexpr, BK_UNIT: tl.constexpr, PREFETCH: tl.constexpr, GDC: tl.constexpr):
    """-flat-sum over BLOCK_M = 2-8 rows a program: B's tile is loaded once a step, and each row
    of A, one [BK] vector, is multiplied into it and summed over K in turn (a static loop). There
    is no [BM, BN, BK] product, whose broadcast of A goes through shared memory on the 3-D path.
    Pointers from ``_flat_ptrs``, offset by a scalar each step. Returns [BM, BN] fp32."""
    row0 = pid_m * BLOCK_M
    a_base, b_ptrs = _flat_ptrs(a_ptr, b_ptr, row0, rn_i, rk, k_start, sam, sak, sbk, sbn, INDEX_64, BK_UNIT)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    k_loop = k_start
    if PREFETCH:  # the first K step peeled: B's tile before the wait, A's rows after it
        k0_ok = (k_start + rk) < k_end
        b0 = _flat_first_b(b_ptrs, n_ok, k0_ok, BK_UNIT, GDC)
        acc = _flat_rows_step(acc, a_base, b0, rk, k0_ok, row0, M, sam, sak, BLOCK_M, BK_UNIT)
        k_loop = k_start + BLOCK_K
    for k in range(k_loop, k_end, BLOCK_K):
        if INDEX_64:
            step = (k - k_start).to(tl.int64)
        else:
            step = k - k_start
        k_ok = rk < k_end - k  # the arange against one scalar (kernels.tiled._load_tiles says why)
        b = _flat_load_b(b_ptrs + step * sbk, n_ok, k_ok, BK_UNIT, not EVEN_K)
        acc = _flat_rows_step(acc, a_base, b, step + rk, k_ok, row0, M, sam, sak, BLOCK_M, BK_UNIT)
    return tl.trans(acc)


@triton.jit
def _strip(a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K, K_PER_SPLIT, sam, sak, sbk, sbn, stride_cm, stride_cn,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT: tl.constexpr,
           SPLIT_MODE: tl.constexpr, EVEN_K: tl.constexpr, INPUT_PRECISION: tl.constexpr,
           INDEX_64: tl.constexpr, BK_UNIT: tl.constexpr, K_DIV: tl.constexpr, GPU_FENCE: tl.constexpr,
           AK_UNIT: tl.constexpr, BN_UNIT: tl.constexpr, A_LEAD_DIV: tl.constexpr, B_LEAD_DIV: tl.constexpr,
           KS_DIV: tl.constexpr,
           bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn,
           HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, sa_ptr, sb_ptr, SCALE: tl.constexpr,
           PREFETCH: tl.constexpr, GDC: tl.constexpr, FLAT: tl.constexpr, SUM_EACH: tl.constexpr,
           g_ptr, stride_g, norm_eps, NORM: tl.constexpr):
    """One program = one column strip x one K-slice (program axes 0 and 1).

    PREFETCH (a ``-pdl`` config, one K-slice): each path (tl.dot, CUDA cores on a K-contiguous
    or an N-contiguous B) peels its first K step: it loads that B tile, then waits for the kernel
    launched before it (GDC: ``gdc_wait``, on a GPU launched with programmatic dependent launch;
    the interpreter has no such instruction, so it runs the same arithmetic without it), then
    reads A. B must be written by no grid still running (a weight at inference; ``pad+`` is
    refused with -pdl, its copy of B is the kernel just before); A, the bias and the residual may
    be the previous kernel's output, and the output may be memory the previous kernel still
    reads, so all of those come after the wait.

    NORM (the norm fold, ``_skinny_fold_kernel``; only on the one-row -flat path, one K-slice): x,
    A's row, is an RMSNorm's input; ``g_ptr`` its weight, a [K] vector. The program multiplies x
    by g as it loads it (NORM = 1; NORM = 2: a unit weight, g not read), then sums x^2 over the
    row again (``_rms_scale``) and scales its fp32 sums by rsqrt(sum / K + norm_eps) before the
    epilogue. With NORM off (``_skinny_kernel``) none of it is traced: the same code as without
    the fold."""
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
        k_loop = k_start
        if PREFETCH:  # the first K step peeled, its B tile before the wait (see the docstring)
            k0 = k_start + rk
            b0 = tl.load(b_ptrs, mask=n_ok[None, :] & (k0[:, None] < k_end), other=0.0)
            if GDC:
                tl.extra.cuda.gdc_wait()
                tl.extra.cuda.gdc_launch_dependents()
            a0 = tl.load(a_ptrs, mask=m_ok[:, None] & (k0[None, :] < k_end), other=0.0)
            acc = mma(a0, b0, acc, INPUT_PRECISION)
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
            k_loop = k_start + BLOCK_K
        for k in range(k_loop, k_end, BLOCK_K):
            if EVEN_K:
                a = tl.load(a_ptrs, mask=m_ok[:, None], other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :], other=0.0)
            else:
                k_left = k_end - k  # the arange against one scalar (kernels.tiled._load_tiles says why)
                a = tl.load(a_ptrs, mask=m_ok[:, None] & (rk[None, :] < k_left), other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :] & (rk[:, None] < k_left), other=0.0)
            acc = mma(a, b, acc, INPUT_PRECISION)
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
    elif FLAT and BLOCK_M > 1:
        acc = _flat_rows(a_ptr, b_ptr, pid_m, rn_i, rk, n_ok, k_start, k_end, M, sam, sak, sbk, sbn,
                         BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, INDEX_64, BK_UNIT, PREFETCH, GDC)
    elif FLAT:
        # One row of A a program (-flat, BLOCK_M = 1): A is a [BK] vector and the product a 2-D
        # tile, [BN, BK] on a K-contiguous B (16-byte vectors along K), [BK, BN] on an N-contiguous
        # one, reduced over K after the loop. The 3-D path below broadcasts A into its [1, BN, BK]
        # product through shared memory, with 4-10 barriers inside the K loop of the BN4 strips
        # (SASS, sm_90); here there is none. Which one is faster depends on the tile (the module
        # docstring), so both are configs.
        if INDEX_64:
            a_vec = a_ptr + pid_m.to(tl.int64) * sam + rk_i * sak  # [BK]
        else:
            a_vec = a_ptr + pid_m * sam + rk_i * sak
        if BK_UNIT:
            b_ptrs = b_ptr + _offsets(rn_i[:, None], rk_i[None, :], sbn, sbk, B_LEAD_DIV, BK_UNIT)  # [BN, BK]
        else:
            b_ptrs = b_ptr + _offsets(rk_i[:, None], rn_i[None, :], sbk, sbn, B_LEAD_DIV, BN_UNIT)  # [BK, BN]
        # -sum (SUM_EACH) keeps one fp32 per column, summing each step's tile over K as it goes:
        # BN registers of accumulator where the other holds BN x BK / (32 x warps) of them.
        if SUM_EACH:
            prod = tl.zeros((BLOCK_N,), dtype=tl.float32)
        elif BK_UNIT:
            prod = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        else:
            prod = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
        if NORM:
            x_vec = a_vec  # the row again after the loop (_rms_scale)
            g_vec = g_ptr + rk_i * stride_g  # [BK]; k_start is 0 (one K-slice)
        k_loop = k_start
        if PREFETCH:  # the first K step peeled, its B tile before the wait (see the docstring)
            k0_ok = (k_start + rk) < k_end
            b0 = _flat_first_b(b_ptrs, n_ok, k0_ok, BK_UNIT, GDC)
            a0 = tl.load(a_vec, mask=k0_ok, other=0.0).to(tl.float32)
            if NORM == 1:
                # g after the wait with A, not before it with B: g is the same [K] vector for every
                # program (L2 holds it after the first), so prefetching it would gain little, and
                # read after the wait it needs no promise that the kernel before does not write it.
                a0 = _times_g(a0, g_vec, k0_ok, True)
                g_vec += BLOCK_K * stride_g
            prod = _flat_step(prod, a0, b0, BK_UNIT, SUM_EACH)
            a_vec += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
            k_loop = k_start + BLOCK_K
        for k in range(k_loop, k_end, BLOCK_K):
            # B's tile is loaded before A's vector. With A first, BN2-BK2048-W2 -flat-sum ran
            # 1 x 2048 x 8192 in 18.7 us where scripts/exp_gemv_kernel.py's "reduce" kernel ran
            # 11.5 (ncu, H200, session 40: 38% against 61% of DRAM bandwidth, 18.7 against 9.5
            # cycles an instruction stalled on L1TEX), with the same registers, occupancy, loads
            # and barriers (sm_90, triton 3.6); the order of the loads was the one difference in
            # the PTX. The swap left that strip as it was (18.4 us), but over the 780 (shape,
            # strip) pairs of each layout that the sweep timed, -flat-sum ran 1.13x and -flat 1.10x
            # faster, the unchanged 3-D strips 1.00x (geomean, each run against its own cuBLAS;
            # benchmarks/results/2026-11-29-h200-s40, calls 3 and 7). The strip's own cause is in
            # its SASS: its carried per-chunk pointers keep 2 of a step's 12 loads in flight. Built
            # as a row pointer plus the K range (scripts/sessions/s41_flat_pointers.patch), 8 were,
            # and that strip ran 13.1 us; but the best strip of each shape ran as fast or up to 6%
            # slower, 0.983x (-flat) and 0.987x (-flat-sum) over 780 pairs (H200, session 41, call
            # 1), so this loop keeps its pointers.
            k_ok = rk < k_end - k  # (unused with EVEN_K; the arange against one scalar: kernels.tiled._load_tiles)
            b = _flat_load_b(b_ptrs, n_ok, k_ok, BK_UNIT, not EVEN_K)
            if EVEN_K:
                a = tl.load(a_vec).to(tl.float32)
            else:
                a = tl.load(a_vec, mask=k_ok, other=0.0).to(tl.float32)
            if NORM == 1:
                a = _times_g(a, g_vec, k_ok, not EVEN_K)
                g_vec += BLOCK_K * stride_g
            prod = _flat_step(prod, a, b, BK_UNIT, SUM_EACH)
            a_vec += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
        if SUM_EACH:
            acc = prod[None, :]
        elif BK_UNIT:
            acc = tl.sum(prod, axis=1)[None, :]
        else:
            acc = tl.sum(prod, axis=0)[None, :]
        if NORM:
            # One fp32 scale for the row, on the complete fp32 sums, before the epilogue (a bias
            # or residual is added to the normalised product, as in the unfused model).
            acc = acc * _rms_scale(x_vec, rk, k_start, k_end, sak, K, norm_eps, BLOCK_K)
    elif BK_UNIT:
        # B is K-contiguous (x @ W.T with a row-major weight): tiles [BN, BK], 16-byte
        # vectors along K; the product [BM, BN, BK] is reduced over K after the loop.
        b_ptrs = b_ptr + _offsets(rn_i[:, None], rk_i[None, :], sbn, sbk, B_LEAD_DIV, BK_UNIT)  # [BN, BK]
        prod = tl.zeros((BLOCK_M, BLOCK_N, BLOCK_K), dtype=tl.float32)
        k_loop = k_start
        if PREFETCH:
            # The first K step peeled: its B tile is loaded before the wait (masked on K always:
            # one tile, and K may be shorter than it).
            k0_ok = (k_start + rk)[None, :] < k_end
            b0 = tl.load(b_ptrs, mask=n_ok[:, None] & k0_ok, other=0.0)
            if GDC:
                tl.extra.cuda.gdc_wait()
                tl.extra.cuda.gdc_launch_dependents()
            a0 = tl.load(a_ptrs, mask=m_ok[:, None] & k0_ok, other=0.0)
            prod += a0.to(tl.float32)[:, None, :] * b0.to(tl.float32)[None, :, :]
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
            k_loop = k_start + BLOCK_K
        for k in range(k_loop, k_end, BLOCK_K):
            if EVEN_K:
                a = tl.load(a_ptrs, mask=m_ok[:, None], other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[:, None], other=0.0)
            else:
                k_left = k_end - k  # the arange against one scalar (kernels.tiled._load_tiles says why)
                a = tl.load(a_ptrs, mask=m_ok[:, None] & (rk[None, :] < k_left), other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[:, None] & (rk[None, :] < k_left), other=0.0)
            prod += a.to(tl.float32)[:, None, :] * b.to(tl.float32)[None, :, :]
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
        acc = tl.sum(prod, axis=2)
    else:
        # B is N-contiguous (a @ W with W [K, N] row-major): tiles [BK, BN], vectors along N.
        b_ptrs = b_ptr + _offsets(rk_i[:, None], rn_i[None, :], sbk, sbn, B_LEAD_DIV, BN_UNIT)  # [BK, BN]
        prod = tl.zeros((BLOCK_M, BLOCK_K, BLOCK_N), dtype=tl.float32)
        k_loop = k_start
        if PREFETCH:  # the first K step peeled, as above
            k0_ok = (k_start + rk)[:, None] < k_end
            b0 = tl.load(b_ptrs, mask=n_ok[None, :] & k0_ok, other=0.0)
            if GDC:
                tl.extra.cuda.gdc_wait()
                tl.extra.cuda.gdc_launch_dependents()
            a0 = tl.load(a_ptrs, mask=m_ok[:, None] & ((k_start + rk)[None, :] < k_end), other=0.0)
            prod += a0.to(tl.float32)[:, :, None] * b0.to(tl.float32)[None, :, :]
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
            k_loop = k_start + BLOCK_K
        for k in range(k_loop, k_end, BLOCK_K):
            if EVEN_K:
                a = tl.load(a_ptrs, mask=m_ok[:, None], other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :], other=0.0)
            else:
                k_left = k_end - k  # the arange against one scalar (kernels.tiled._load_tiles says why)
                a = tl.load(a_ptrs, mask=m_ok[:, None] & (rk[None, :] < k_left), other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :] & (rk[:, None] < k_left), other=0.0)
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
                k_left = K - (k0 + i * BLOCK_K)  # the arange against one scalar (kernels.tiled._load_tiles)
                a = tl.load(a_ptrs, mask=m_ok[:, None] & (rk[None, :] < k_left), other=0.0)
                b = tl.load(b_ptrs, mask=n_ok[None, :] & (rk[:, None] < k_left), other=0.0)
            acc = mma(a, b, acc, INPUT_PRECISION)
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
        split_epilogue(acc, c_ptr, ws_ptr, lock_ptr, rm_i, rn_i, m_ok[:, None] & n_ok[None, :],
                       stride_cm, stride_cn, M, N, strip, 0, n_kb, kb_per_strip,
                       2, GPU_FENCE, BLOCK_M, BLOCK_N,
                       bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn, HAS_BIAS, ACT, HAS_RES,
                       sa_ptr, sb_ptr, SCALE)


# ---------------------------------------------------------------------- plan + space


# ---------------------------------------------------------------------- launch

def _args(a, b, c, cfg: SkinnyConfig, ws, locks, allow_tf32: bool, epilogue: EpilogueArgs | None = None):
    if cfg.pdl:
        if pdl_misfit(cfg):  # (validate says so; run and prepare do not call it)
            raise ValueError(f"{cfg.id}: {PDL_MISFIT_WHY}")
        if a.is_cuda:
            check_pdl_gpu(a.device)
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
        PREFETCH=cfg.pdl, GDC=cfg.pdl and not _INTERPRETED, FLAT=cfg.flat, SUM_EACH=cfg.sum_each,
        **epilogue_consts(epilogue),
    )
    return p, args, consts


def check_pdl_device(capability: tuple[int, int], name: str) -> None:
    """Refuse a ``-pdl`` config on a GPU before Hopper, by name: griddepcontrol is an sm_90
    instruction, and ptxas would otherwise fail deep inside Triton's compile.

    >>> check_pdl_device((9, 0), "NVIDIA H100")
    >>> check_pdl_device((8, 0), "NVIDIA A100")
    Traceback (most recent call last):
    ...
    ValueError: skinny -pdl configs need compute capability 9.0 or later (Hopper); NVIDIA A100 is 8.0
    """
    if tuple(capability) < (9, 0):
        raise ValueError(f"skinny -pdl configs need compute capability 9.0 or later (Hopper); "
                         f"{name} is {capability[0]}.{capability[1]}")


def check_pdl_gpu(device=None) -> None:
    """``check_pdl_device`` for a CUDA device (default: the current one); its name is read only to
    say why."""
    cap = torch.cuda.get_device_capability(device)
    if tuple(cap) < (9, 0):
        check_pdl_device(cap, torch.cuda.get_device_name(device))


def _launch_options(cfg: SkinnyConfig) -> dict:
    """Triton's launch options for ``cfg``: its warps and stages, and PDL for a ``-pdl`` config
    on a GPU (the interpreter launches nothing)."""
    return {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages,
            **({"launch_pdl": True} if cfg.pdl and not _INTERPRETED else {})}


def _buffers(a, b, cfg: SkinnyConfig, workspace: SplitKWorkspace | None):
    M, K = a.shape
    p = plan(M, b.shape[1], K, cfg)
    if p["splits"] == 1 and not cfg.stream_k:
        return None, None
    ws = workspace or SplitKWorkspace()  # a fresh one is correct, only slower
    return (ws.partials(p["workspace_numel"], cfg.deterministic, a.device),
            ws.counters(p["tiles"], a.device))


FOLD_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def check_fold(a, b, cfg: SkinnyConfig, norm_weight, norm_eps) -> None:
    """ValueError naming why ``cfg`` cannot fold the RMSNorm of ``a``'s rows into ``a @ b`` with
    weight ``norm_weight`` and ``norm_eps`` (``run``'s norm fold); None where it can."""
    if norm_weight is not None and norm_eps is None:
        raise ValueError("norm fold: norm_eps is required with norm_weight (the model's RMSNorm eps)")
    M, K = a.shape
    N = b.shape[1]
    why = fold_misfit(cfg, M, K)
    if why:
        raise ValueError(why)
    if a.dtype not in FOLD_DTYPES:
        raise ValueError(f"norm fold: A is {a.dtype}; the fold multiplies x by its norm weight as loaded, "
                         f"for {', '.join(str(d) for d in FOLD_DTYPES)} only (an fp8 A is already quantised)")
    # N-contiguous: what the kernel reads as BN_UNIT. A dim of size 1 has no layout, so a K = 1 or
    # N = 1 B is never refused for it (a contiguous W of one column looks N-contiguous transposed).
    if K > 1 and N > 1 and b.stride(1) == 1 and b.stride(0) != 1:
        raise ValueError(f"norm fold: B is N-contiguous (strides {tuple(b.stride())}); the fold serves a "
                         "Linear's weight, B = W.t() with W [N, K] K-contiguous, the only layout whose "
                         "spaces hold -flat strips (skinny_spec.gemv_layout)")
    g = norm_weight
    if g is None:  # a unit-weight norm (its weight in B already): only eps to check
        pass
    elif not isinstance(g, torch.Tensor):
        raise ValueError(f"norm fold: norm_weight must be a torch.Tensor, not {type(g).__name__}")
    elif tuple(g.shape) != (K,):
        raise ValueError(f"norm fold: norm_weight has shape {tuple(g.shape)}; the norm over A's rows needs (K,) = ({K},)")
    elif g.dtype != a.dtype:
        raise ValueError(f"norm fold: norm_weight is {g.dtype}, A is {a.dtype}; they must match (as an "
                         "RMSNorm's weight and its input do in a model)")
    elif g.device != a.device:
        raise ValueError(f"norm fold: norm_weight is on {g.device}, A on {a.device}")
    if isinstance(norm_eps, bool) or not isinstance(norm_eps, (int, float)) or not math.isfinite(norm_eps) \
            or norm_eps < 0:
        raise ValueError(f"norm fold: norm_eps must be a finite number >= 0 (the model's RMSNorm eps), not {norm_eps!r}")


def _fold_args(args, consts, g: torch.Tensor | None, norm_eps: float):
    """``_skinny_fold_kernel``'s (args, constexprs) from the plain kernel's (``_args``): g's pointer
    after the epilogue's, its stride and eps after the epilogue's strides. Without g (a unit-weight
    norm) A's pointer stands in for it, never read (NORM_MODE 2)."""
    a = args[0]
    fold_args = (*args[:N_POINTERS], a if g is None else g, *args[N_POINTERS:], 0 if g is None else g.stride(0),
                 float(norm_eps))
    fold_consts = {k: v for k, v in consts.items() if k != "STREAM"}  # (no stream-K: a tl.dot path)
    fold_consts["INDEX_64"] = consts["INDEX_64"] or (g is not None and needs_int64(g))
    fold_consts["NORM_MODE"] = 2 if g is None else 1
    return fold_args, fold_consts


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: SkinnyConfig, *,
        allow_tf32: bool = False, workspace: SplitKWorkspace | None = None,
        epilogue: EpilogueArgs | None = None, norm_weight: torch.Tensor | None = None,
        norm_eps: float | None = None):
    """The skinny kernel into ``out``; the ``epilogue`` runs on each strip's complete fp32 sum,
    in the program that writes it (tiled.split_epilogue).

    ``norm_weight`` (g, shape (K,), A's dtype and device) with ``norm_eps``: the norm fold. Each
    row x of A is an RMSNorm's input, and ``out = (x * rsqrt(mean(x^2) + norm_eps) * g) @ b``, then
    the epilogue (``_skinny_fold_kernel`` says how its rounding differs from the two kernels').
    ``norm_eps`` alone: a unit-weight norm, ``out = (x * rsqrt(mean(x^2) + norm_eps)) @ b``, for a
    ``b`` that holds the norm's weight already (diag(g) @ b): g is then not loaded.
    Only a one-row -flat strip with one K-slice and a K-contiguous b folds (``check_fold``;
    ``skinny_spec.fold_misfit`` its config part); anything else is a ValueError naming why. eps has no default:
    models differ (1e-5, 1e-6), and a wrong one would be silent. Without ``norm_weight`` this is
    the plain launch, unchanged."""
    if norm_weight is not None or norm_eps is not None:
        check_fold(a, b, cfg, norm_weight, norm_eps)  # (before _buffers: a split would allocate)
    ws, locks = _buffers(a, b, cfg, workspace)
    p, args, consts = _args(a, b, out, cfg, ws, locks, allow_tf32, epilogue)
    kernel = _skinny_kernel
    if norm_weight is not None or norm_eps is not None:
        args, consts = _fold_args(args, consts, norm_weight, norm_eps)
        kernel = _skinny_fold_kernel
    try:
        return _launch(kernel, p["grid"], args, {**consts, **_launch_options(cfg)})
    except BaseException:
        if ws is not None and workspace is not None:  # (a fresh workspace is dropped anyway)
            workspace.interrupted(a.device)  # SplitKWorkspace.interrupted says why
        raise


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
    kernel = _skinny_kernel[p["grid"]](*args, **consts, **_launch_options(cfg))
    d = direct(_skinny_kernel, kernel, p["grid"], args, consts, a, b, ws, epilogue)
    if d is None or ws is None:
        return None if d is None else (d.matches, d)

    def matches(a, b, epilogue=None):
        return d.matches(a, b, workspace.partials(p["workspace_numel"], cfg.deterministic, a.device), epilogue)

    def launch(a, b, c, epilogue=None):
        d(a, b, c, workspace.partials(p["workspace_numel"], cfg.deterministic, a.device),
          workspace.counters(p["tiles"], a.device), epilogue)
    return matches, launch


def inductor_export(choice, problem: Problem, sm_count: int | None = None) -> dict:
    raise Unsupported(f"family {NAME}: no Inductor template")
