"""Device functions the Triton families share: the dot (``mma``, with the interpreter's bf16
and fp8's promotion modes), the fused epilogue (scale, bias, activation, residual) and the
store of a tile in every split mode (``split_epilogue``: plain, or the last arriver's sum of the
fp32 partials), plus the kernel that sums DecomposeK's partials. kernels.tiled, skinny and
persistent call these from their own kernels; kernels.tiled re-exports them."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _gpu_fence(x):
    # fence.acq_rel.gpu: orders this thread's prior memory operations (stores,
    # reductions) before its later ones, for every observer on the GPU.
    tl.inline_asm_elementwise("fence.acq_rel.gpu; mov.u32 $0, $1;", "=r,r", [x],
                              dtype=tl.int32, is_pure=False, pack=1)


# The Triton CPU interpreter multiplies bf16 tl.dot operands wrongly (triton 3.9: a 16x16x16
# bf16 dot gave 1e10 where fp32 gives ~1; loads, stores and casts of bf16 are right), so in
# the interpreter bf16 operands are upcast to fp32 before the dot: every bf16 product is exact
# in fp32 and the accumulator is fp32 on a GPU too, so the result is the GPU's up to the order
# of the fp32 sums. ``input_precision`` names this mode.
UPCAST_BF16 = "fp32-upcast"
# fp8 operands (scaled_mm): Hopper's fp8 tensor cores keep the running sum of one dot at reduced
# precision (about 14 mantissa bits, DeepSeek-V3 report sec. 3.3.2), so each K-block's product
# is summed into the fp32 accumulator by an fp32 add ("promotion" every BLOCK_K), as
# torch._scaled_mm does without use_fast_accum and Inductor's scaled mm template with
# USE_FAST_ACCUM=False. Triton 3.9's interpreter runs fp8 tl.dot (exact: fp8 products fit
# fp32), so CPU tests run this path too.
FP8_PROMOTE = "fp8-promote"


@triton.jit
def mma(a, b, acc, INPUT_PRECISION: tl.constexpr):
    """``acc + a @ b`` in fp32: tl.dot, or the interpreter's bf16 workaround (UPCAST_BF16)."""
    if INPUT_PRECISION == "fp32-upcast":
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    elif INPUT_PRECISION == "fp8-promote":
        out = acc + tl.dot(a, b, out_dtype=tl.float32)
    else:
        out = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    return out


@triton.jit
def activation(x, ACT: tl.constexpr):
    """The activation numbered ``ACT`` (gemmtune.epilogue.ACTIVATIONS) on fp32 ``x``."""
    if ACT == 1:
        # gelu_tanh: 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
        # The sigmoid form needs only exp: triton.language has no tanh in every version we
        # support. Far out on the negative side exp overflows to inf and x / inf = -0, as it should.
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        x = x / (1.0 + tl.exp(-2.0 * u))
    elif ACT == 2:
        # gelu_erf (torch's default GELU): 0.5 x (1 + erf(x / sqrt(2))).
        x = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    elif ACT == 3:
        x = x / (1.0 + tl.exp(-x))  # silu: x * sigmoid(x)
    elif ACT == 4:
        # relu, NaN kept as torch.relu keeps it: tl.maximum(x, 0.0) returned 0 for a NaN (Triton's
        # maximum drops NaN by default, as the GPU's max.f32 does), hiding a NaN activation
        # behind zeros (session 45's CPU hunt).
        x = tl.where(x < 0.0, 0.0, x)
    return x


@triton.jit
def fused_epilogue(x, rm, rn, mask, N, bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn,
                   HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr,
                   M, sa_ptr, sb_ptr, SCALE: tl.constexpr, R_LEAD_DIV: tl.constexpr = 1):
    """``act(x * sa * sb + bias[rn]) + residual[rm, rn]`` in fp32 (gemmtune.epilogue). ``rm``, ``rn``
    broadcast to ``x`` (a tile: rm[:, None], rn[None, :]; the flat sum kernel: one index each).
    SCALE (scaled_mm): 1 multiplies by the scalars sa_ptr[0] * sb_ptr[0], 2 by sa_ptr[rm] * sb_ptr[rn]
    (contiguous fp32 vectors). R_LEAD_DIV > 1 (2-D tiles only; launch_args.store_divisor): the
    residual's row offsets are multiples of it, and the caller's mask is constant over aligned
    groups of it along N. With every constexpr off this is ``x`` itself: a plain mm compiles to
    the code it had before epilogues."""
    if SCALE == 1:
        x = x * (tl.load(sa_ptr) * tl.load(sb_ptr))
    elif SCALE == 2:
        x = x * tl.load(sa_ptr + rm, mask=rm < M, other=0.0) * tl.load(sb_ptr + rn, mask=rn < N, other=0.0)
    if HAS_BIAS:
        x = x + tl.load(bias_ptr + rn * stride_bias, mask=rn < N, other=0.0).to(tl.float32)
    x = activation(x, ACT)
    if HAS_RES:
        r_rows = rm * stride_rm
        if R_LEAD_DIV > 1:
            # The residual's rows start on 16-byte boundaries (see split_epilogue's C_LEAD_DIV).
            r_rows = tl.multiple_of(r_rows, [R_LEAD_DIV, R_LEAD_DIV])
        x = x + tl.load(res_ptr + r_rows + rn * stride_rn, mask=mask, other=0.0).to(tl.float32)
    return x


@triton.jit
def parallel_fixup(count, c_ptr, ws_ptr, lock_ptr, rm, rn, stride_cm, stride_cn, M, N, tile, pid_k, num_splits,
                   SPIN: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   FIX_SPLITS: tl.constexpr, FIX_CHUNK: tl.constexpr,
                   bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn,
                   HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr,
                   sa_ptr, sb_ptr, SCALE: tl.constexpr):
    """SPLIT_MODE 3: the tile's ``num_splits`` partials (stored as in mode 1) summed by all of the
    tile's programs at once, each over its own chunks of FIX_CHUNK elements, every partial of a
    chunk in one [FIX_SPLITS, FIX_CHUNK] load and one tl.sum (a fixed tree: bitwise reproducible).
    Why: mode 1's last arriver reads the S partials one after another, an L2 round trip each
    (128x128x32768 bf16, 64x64 tiles, S=32 on an H100: 26.9 us against 9.2 us for the slices
    alone). Here the sum is one round trip after the wait: 13.2 us, the same as mode 2's atomics
    (13.2 us), in a fixed order (benchmarks/results/2026-11-26-h100-splitk-reduce).
    ``count`` is this program's arrival count (1..S). SPIN (a GPU): wait until all S have arrived,
    which needs the tile's programs resident at once (the launcher makes a cooperative launch);
    the counter then climbs to 2S as programs leave, and the last one out zeroes it, so no
    program can still be waiting when it is reset. Without SPIN (the CPU interpreter, which runs
    programs one after another) the last arriver sums every chunk, as mode 1 does."""
    if SPIN:
        seen = count
        while seen < num_splits:
            seen = tl.atomic_add(lock_ptr + tile, 0, sem="acquire")
        _gpu_fence(tile)
        first = pid_k
        step = num_splits
        go = True
    else:
        first = 0
        step = 1
        go = count == num_splits
    if go:
        row0 = tl.min(rm, axis=0)
        col0 = tl.min(rn, axis=0)
        s = tl.arange(0, FIX_SPLITS)
        split_stride = tl.num_programs(0) * (BLOCK_M * BLOCK_N)
        base = ws_ptr + tile * (BLOCK_M * BLOCK_N) + s[:, None] * split_stride
        for c in range(first, (BLOCK_M * BLOCK_N) // FIX_CHUNK, step):
            e = c * FIX_CHUNK + tl.arange(0, FIX_CHUNK)
            part = tl.load(base + e[None, :], mask=s[:, None] < num_splits, other=0.0, cache_modifier=".cg")
            total = tl.sum(part, axis=0)
            r = row0 + e // BLOCK_N
            col = col0 + e % BLOCK_N
            ok = (r < M) & (col < N)
            total = fused_epilogue(total, r, col, ok, N, bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn,
                                   HAS_BIAS, ACT, HAS_RES, M, sa_ptr, sb_ptr, SCALE)
            tl.store(c_ptr + r * stride_cm + col * stride_cn, total.to(c_ptr.dtype.element_ty), mask=ok)
    if SPIN:
        left = tl.atomic_add(lock_ptr + tile, 1, sem="relaxed")
        if left == 2 * num_splits - 1:
            tl.atomic_xchg(lock_ptr + tile, 0)
    elif go:
        tl.atomic_xchg(lock_ptr + tile, 0)


@triton.jit
def split_epilogue(acc, c_ptr, ws_ptr, lock_ptr, rm, rn, mask, stride_cm, stride_cn, M, N,
                   tile, pid_k, share, num_splits, SPLIT_MODE: tl.constexpr, GPU_FENCE: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn,
                   HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr,
                   sa_ptr, sb_ptr, SCALE: tl.constexpr,
                   C_LEAD_DIV: tl.constexpr = 1, R_LEAD_DIV: tl.constexpr = 1,
                   FIX_SPLITS: tl.constexpr = 1, FIX_CHUNK: tl.constexpr = 1, FIX_SPIN: tl.constexpr = False):
    """Store a program's fp32 tile ``acc`` (rows ``rm``, cols ``rn``), shared by every kernel
    that splits K across programs. SPLIT_MODE 0: cast and store (one slice, or a slice of
    DecomposeK's batched partials). 1/2: the fused split-K reduction (module docstring);
    3: every slice's partial stored as in 1, then the tile's programs share its sum
    (``parallel_fixup``; FIX_SPLITS, FIX_CHUNK are its block sizes, FIX_SPIN its wait);
    ``tile`` indexes the arrival counter of this output tile, to which this program adds its
    ``share`` of the ``num_splits`` it needs in all (1 of S slices; a stream-K program adds the
    K-blocks it reduced, in mode 2 only): the program that completes the count writes the tile.
    The fused epilogue (``fused_epilogue``) runs on the complete fp32 sum just before the final
    cast: in mode 0 on ``acc``, in modes 1/2 only in the last arriver, never on a partial.
    DecomposeK's partials pass it switched off; its sum kernel applies it.
    C_LEAD_DIV > 1 (launch_args.store_divisor; only with ``stride_cn`` the constant 1): the row
    offsets ``rm * stride_cm`` are multiples of it and ``mask`` is constant over aligned groups
    of it along N, the caller's promise; R_LEAD_DIV the same for the residual's loads."""
    c_rows = rm[:, None] * stride_cm
    if C_LEAD_DIV > 1:
        # Stated on the offset tensor, as the tiled kernel does for its loads: with a row stride
        # of 8 x odd bf16 elements (1000: 2000 B, 16-byte aligned rows) Triton could not prove
        # alignment and stored one element at a time (64 STG.E.U16 per thread at 1000^3 on
        # sm_90a) where 8 STG.E.128 do.
        c_rows = tl.multiple_of(c_rows, [C_LEAD_DIV, C_LEAD_DIV])
    # One pointer add of the summed int32 offsets (Inductor's template adds one index), not two:
    # (c_ptr + c_rows) + cols made a 64-bit pointer per element first, one IMAD.WIDE a stored
    # element more (96x50257x768 bf16, sm_90a: 64 a thread). The valid elements' offsets fit in
    # the offset dtype (int64 where needs_int64 says a tensor's extent does not fit in int32).
    c_ptrs = c_ptr + (c_rows + rn[None, :] * stride_cn)
    if SPLIT_MODE == 0:
        acc = fused_epilogue(acc, rm[:, None], rn[None, :], mask, N, bias_ptr, res_ptr, stride_bias,
                             stride_rm, stride_rn, HAS_BIAS, ACT, HAS_RES, M, sa_ptr, sb_ptr, SCALE,
                             R_LEAD_DIV)
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)
    else:
        # The fp32 workspace is tile-major: one whole BLOCK_M x BLOCK_N block per output tile
        # ([tiles, BM, BN] in mode 2; [S, tiles, BM, BN] in mode 1, ``tiles`` being grid axis 0),
        # so every offset below is a compile-time multiple of the block and no mask is needed:
        # a tile's block exists whole even where the tile hangs over M or N (those elements are
        # zeros of the masked loads, never stored to C). Indexed as [M, N] with N's stride, a
        # ragged N (200x200x20000 bf16) gave Triton no alignment to prove: scalar loads and
        # stores with a 64-bit address each, 205 registers where the even 64x64x65536 took 72
        # (BM64-BN64-BK64-S4-W4 atomic, ptxas for sm_90 via gemmtune inspect, triton 3.9).
        w_off = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        if SPLIT_MODE == 1 or SPLIT_MODE == 3:
            w_tile = ws_ptr + (pid_k * tl.num_programs(0) + tile) * (BLOCK_M * BLOCK_N)
            tl.store(w_tile + w_off, acc)
        else:
            w_tile = ws_ptr + tile * (BLOCK_M * BLOCK_N)
            tl.atomic_add(w_tile + w_off, acc, sem="relaxed")
        # Every thread's partial must be visible GPU-wide before the arrival is
        # counted: a fence in each thread (red/store are otherwise unordered with
        # thread 0's counter atomic; without it the atomic mode lost partials on
        # an H200), then a barrier.
        if GPU_FENCE:
            _gpu_fence(tile)
        tl.debug_barrier()
        arrived = tl.atomic_add(lock_ptr + tile, share, sem="acq_rel")
        if SPLIT_MODE == 3:
            parallel_fixup(arrived + share, c_ptr, ws_ptr, lock_ptr, rm, rn, stride_cm, stride_cn, M, N,
                           tile, pid_k, num_splits, FIX_SPIN, BLOCK_M, BLOCK_N, FIX_SPLITS, FIX_CHUNK,
                           bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn, HAS_BIAS, ACT, HAS_RES,
                           sa_ptr, sb_ptr, SCALE)
        elif arrived + share == num_splits:
            if GPU_FENCE:
                _gpu_fence(tile)
            # Last arriver: partials of other SMs are read from L2 (.cg skips the
            # non-coherent L1).
            if SPLIT_MODE == 1:
                total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                split_stride = tl.num_programs(0) * (BLOCK_M * BLOCK_N)
                w_first = ws_ptr + tile * (BLOCK_M * BLOCK_N)
                for s in range(0, num_splits):
                    total += tl.load(w_first + s * split_stride + w_off, cache_modifier=".cg")
            else:
                total = tl.load(w_tile + w_off, cache_modifier=".cg")
                # Small tiles over many warps give layouts where two threads hold the
                # same element: without this barrier one thread's zeroing store beat
                # the other's load, and outputs came back short on an H200.
                tl.debug_barrier()
                # Leave the workspace zeroed for the next launch.
                tl.store(w_tile + w_off, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32))
            total = fused_epilogue(total, rm[:, None], rn[None, :], mask, N, bias_ptr, res_ptr, stride_bias,
                                   stride_rm, stride_rn, HAS_BIAS, ACT, HAS_RES, M, sa_ptr, sb_ptr, SCALE,
                                   R_LEAD_DIV)
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=mask)
            tl.atomic_xchg(lock_ptr + tile, 0)


@triton.jit
def _sum_splits_kernel(ws_ptr, out_ptr, bias_ptr, res_ptr, sa_ptr, sb_ptr, MN, N, S, stride_om, stride_on,
                       stride_bias, stride_rm, stride_rn, BLOCK: tl.constexpr, INDEX_64: tl.constexpr,
                       HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr,
                       SCALE: tl.constexpr, BLOCK_S: tl.constexpr = 1):
    """out[m, n] = epilogue(sum_s ws[s, m, n]), summed in fp32 and cast on store. Each program loads
    BLOCK_S slices of its BLOCK outputs at a time and sums them as a tree at the end: a fixed order,
    so every call gives the same bits (BLOCK_S = 1: slice order)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    rs = tl.arange(0, BLOCK_S)
    acc2 = tl.zeros((BLOCK_S, BLOCK), dtype=tl.float32)
    for s0 in range(0, S, BLOCK_S):
        ss = s0 + rs
        acc2 += tl.load(ws_ptr + ss[:, None] * MN + offs[None, :], mask=(ss[:, None] < S) & mask[None, :],
                        other=0.0)
    acc = tl.sum(acc2, axis=0)
    m = offs // N
    n = offs % N
    if INDEX_64:
        m = m.to(tl.int64)
        n = n.to(tl.int64)
    acc = fused_epilogue(acc, m, n, mask, N, bias_ptr, res_ptr, stride_bias, stride_rm, stride_rn,
                         HAS_BIAS, ACT, HAS_RES, MN // N, sa_ptr, sb_ptr, SCALE)
    tl.store(out_ptr + m * stride_om + n * stride_on, acc.to(out_ptr.dtype.element_ty), mask=mask)
