"""AnalyticModel: a roofline + occupancy + pipelining estimate of each choice's device time.

It needs no training and no GPU: only the DeviceInfo (SMs, shared memory,
registers, L2 and the datasheet rates), so it serves unknown GPUs too. It is a
ranking prior for the tuner (which choices are worth benchmarking), not a
substitute for a measurement.

One Triton program computes a BLOCK_M x BLOCK_N tile over ``k_len`` of K in
``k_iters`` steps of BLOCK_K. The estimate is the slowest of:

* the busiest SM: it runs ``ceil(programs / SMs)`` programs, ``occupancy`` at a
  time (shared memory, registers and warp slots decide how many fit). Each step
  costs at least its tensor-core math, its L2->SM operand traffic and (for an
  unaligned operand, loaded element by element) its narrow loads; a program
  alone also waits for memory: one load latency per step divided by the loads
  the pipeline keeps in flight (``num_stages - 1``). This is where tile-wave
  quantisation shows: 133 programs on 132 SMs take two rounds.
* DRAM traffic: operands re-read per concurrent window of tiles (GROUP_M
  ordering shares A's rows, row-major ordering shares B's columns); an operand
  that fits in L2 is read once.

plus what a family adds: split-K partials (fp32 workspace traffic, atomics, and
the last-arriving program's serial read of all partials in deterministic mode),
DecomposeK's second launch that sums the partials, and the ``pad+`` copies. A bmm
(``problem.batch`` products) multiplies the tiles and programs by the batch, and the
operand and output bytes by it (a broadcast operand's once). aten
(cuBLAS) is modelled as a well-tuned library: roofline at 80% of peak math and
85% of bandwidth, and about 5x slower math when an operand is not 16-byte
aligned (cuBLAS then runs narrow-load kernels).

Constants are loose fits to the committed H200 measurements
(benchmarks/results/2026-11-21-h200-public-full); the comment on each says which.

Example::

    >>> import gemmtune
    >>> from gemmtune.device import DeviceInfo
    >>> from gemmtune.model import AnalyticModel
    >>> p = gemmtune.Problem.from_sizes(32, 32, 28672, "bf16")
    >>> m = AnalyticModel(DeviceInfo.lookup("h200"))
    >>> est = m.predict(p, gemmtune.space(p, "splitk", device="h200"))   # estimated ms
"""

from __future__ import annotations

import numpy as np

from ..device import DeviceInfo
from ..precision import pads_b_kmajor_problem, runs_3xtf32
from ..problem import FP8_DTYPES, Problem, element_size
from .choices import ATEN, DECOMPOSE_K, PERSISTENT, SKINNY, SPLITK, ChoiceBatch, batch

# --- time constants (H200 measurements, benchmarks/results/2026-11-21-h200-public-full)
# Per kernel launch inside a CUDA graph, prologue included: 1024^3 cuBLAS ran 5.9 us of
# which ~2.7 us is math; single-program split-K runs bottom out near 6 us.
LAUNCH_S = 3.0e-6
# One K-step of a program with a single load in flight: 32x32x28672 with BK16, 1 stage
# took 1068 us over 1792 steps = 0.60 us/step; 3 stages ~0.34, 5 stages ~0.18.
LATENCY_S = 0.6e-6
# Bytes one program streams per second on top of the latency (32x32 tiles, BK 32 -> 128).
PROGRAM_BW = 150e9
# L2 -> SM operand bandwidth per SM: 256x128x64 bf16 tiles at ~700 TFLOPS need ~64 GB/s
# each, and 64x32 tiles ran 4096^3 bf16 at ~half that rate (970 us against 206 us).
L2_SM_BW = 70e9
# Element-wise loads of an unaligned operand, per SM, per 2 bytes of element: 4095^3 bf16
# with narrow loads streamed ~14 GB/s per SM (1.78 ms against 0.21 ms aligned).
UNALIGNED_SM_BW = 14e9
# Fraction of peak math the Triton kernel reaches: wgmma tiles (BLOCK_M >= 64, warps a
# multiple of 4) on Hopper: 8192^3 bf16 best 668 TFLOPS of 989; mma.sync tiles: ~half;
# fp32 without tf32 (FMA): 4096^3 best 45 TFLOPS of 67.
EFF_WGMMA = 0.72
EFF_MMA = 0.45
EFF_FMA = 0.68
# The FMA path keeps a register tile per thread: below 32 fp32 accumulators a thread
# reloads operands more often than it multiplies (4096^3 fp32: 32x32 tiles over 4 warps,
# 8 accumulators, ran 1.48x the 64x64 one); above 64 with fp32 operands it spills
# (128x128 over 4 warps: 14.7 ms against 3.0 ms).
FMA_ACC_KNEE = 32.0
FMA_SPILL_ACC = 64.0
FMA_SPILL_FACTOR = 4.0
# 3xTF32 (fp32 with TF32 off, gemmtune.precision): a 128x128 tile on 4 warps (128 accumulators a
# thread) ran 2.2-2.6x the time of the same tile on 8 warps (H200, 512x4096x4096: 465-481 against
# 208-212 us; 4096^3: 5700-6078 against 3869-4066; session 48, call 5); 64 accumulators ran well.
X3_SPILL_ACC = 64.0
X3_SPILL_FACTOR = 2.4
# 3xTF32 with a row-major (N-contiguous) B: TF32 wgmma reads B K-major only, so each tile is
# written to shared memory transposed (precision.pads_b_kmajor); the same shapes and default
# space ran 1.50-1.56x slower than with a K-major B (H200, session 49, call 5: 4096^3 2438 against
# 1631 us). A pad+ choice whose copy of B is K-major does not pay it.
X3_ROW_B_FACTOR = 1.5
# 3xTF32's tile shapes, from triton_mm's default space on 4096^3, 2048^3 and 1024x4096x4096 fp32 in
# both B layouts (H200, session 49, call 5; times against each problem's best, BM128-BN64-BK32):
# - on wgmma (BLOCK_M >= 64), more warps than BLOCK_M / 16 (8 warps over 64 rows: the two warp
#   groups split N, each splitting the same A tile into its high and low parts): 2.3-3.3x
#   (BM64-BN128-BK32 on 8 warps 2.29-2.33x, on 4 warps 1.09-1.10x);
# - BLOCK_K 16 (two 8-deep TF32 steps between barriers): 1.57-1.67x (BM64-BN64, against 1.15-1.20x
#   at BLOCK_K 32);
# - 2 pipeline stages: BM128-BN128-BK32 on 8 warps 1.30-1.37x, where the estimate put it first.
X3_WIDE_WARPS_FACTOR = 2.2
X3_BK16_FACTOR = 1.4
X3_TWO_STAGE_FACTOR = 1.25
# - BLOCK_K 32 against 64 on the same tile: once triton_mm's default space held BM128-BN128-BK64
#   on 8 warps (configs.fit_stages), its BK32 twin ran 1.08-1.19x its time on all 9 fp32 shapes
#   timed (H200, session 50, call 2, scripts/exp_x3_tiles.py; geomean 1.14x, both B layouts), and
#   BM128-BN64-BK32-S4-W8, the best tile before, 1.02-1.16x: each K step's split of the operands
#   into high and low parts and its barrier are paid per BLOCK_K, so 64-deep steps halve them.
#   Charged on top of X3_BK16_FACTOR for BLOCK_K 16.
X3_BK32_FACTOR = 1.13
# - one warp group on an SM (a wgmma tile on 4 warps whose fp32 stages fill shared memory, so the
#   SM holds one such program, or a persistent one on 4 warps): nothing overlaps one K step's
#   split of the operands into high and low parts with the tensor cores' work. Measured (H200,
#   session 50, call 4, scripts/exp_x3_tiles.py --set warpgroup, 4 shapes): BM64-BN128-BK64-S3-W4
#   (147 KB, one program an SM) ran 1.17-1.26x the time of BM64-BN128-BK32-S3-W4 (73 KB, three),
#   where the BK32 charge alone would make it 1.13x faster: 1.32-1.42x for the lone warp group,
#   1.41-1.54x the 8-warp BM128-BN128-BK64 tile's time. Call 3 had put such tiles first on several
#   shapes where none was among the default space's 12 fastest.
X3_ONE_WARPGROUP_FACTOR = 1.35
# K not a multiple of BLOCK_K (EVEN_K off): masked operand loads go through registers,
# and past ~100 registers a thread (fp32 accumulators + one step of 16-bit operands) the
# kernel spills. 333x4097x1025 bf16: 128x128x64 tiles over 4 warps (192 registers) took
# 527 us, 64x128x128 (160) 647 us, 128x64x32 (88) 61 us; 1000^3 shows the same order.
MASKED_REGS_KNEE = 100.0
MASKED_REGS_POWER = 2.5
DRAM_EFF = 0.85
# Triton kernels stream DRAM less efficiently than cuBLAS on skinny shapes
# (1x6144x4096 bf16: best Triton 3.7 TB/s of 4.8, cuBLAS 4.1 net of launch).
TRITON_DRAM_EFF = 0.75
# Fused split-K: the last program of a tile reads every partial in deterministic mode
# (128 splits of 32x32: +7.8 us; of 128x128: +257 us -> ~40 GB/s plus ~20 ns a slice);
# atomic mode adds partials in L2 (16 tiles x 128 slices of 64 KB: +80 us -> ~1.7 TB/s
# on 132 SMs, i.e. ~13 GB/s per SM).
DET_SLICE_S = 0.02e-6
REDUCE_BW = 40e9
ATOMIC_SM_BW = 13e9
SYNC_S = 0.3e-6  # per program: fence + arrival counter
# DecomposeK's sum kernel: a short serial chain per slice.
SUM_SLICE_S = 0.05e-6
# pad+: F.pad copies of unaligned views run at about half of bandwidth (4095^3:
# pad+aten 319 us against 175 us for aligned 4096^3 cuBLAS).
PAD_BW_EFF = 0.45
# cuBLAS: 8192^3 bf16 778 TFLOPS (79% of 989), 4096^3 fp32 51 TFLOPS (76% of 67),
# GEMV-like shapes ~85% of bandwidth; small-MN long-K shapes pay a split-K reduction
# (~3.5 us: 32x32x28672 7.8 us, 64x64x65536 10.3 us); unaligned operands ~5x slower math
# (4095^3: 924 us; 333x4097x1025: 44 us) and about half the bandwidth, and then tiles of
# 128x128 leave SMs idle in the last wave (333x4097: 99 tiles on 132 SMs).
ATEN_EFF = 0.80
ATEN_EFF_FP32 = 0.77
ATEN_SPLITK_S = 3.5e-6
ATEN_UNALIGNED_EFF = 0.2
ATEN_UNALIGNED_BW = 0.5
# ... but with few 128x128 output tiles and a long K, cuBLAS splits K to fill the SMs: one
# split per this many K. Without it the model put 36 collected small-MN long-K unaligned
# shapes 3-16x too slow (H200 bf16, data/collect: 55x509x21568 34.5 us measured, 265 us
# predicted); with it, 38 us predicted.
ATEN_UNALIGNED_SPLIT_K = 2048
# How much of L2 an operand may take and still be read from DRAM only once.
L2_FIT = 0.4
# Soft maximum of overlapping bounds (p-norm): equal bounds cost 2^(1/4) = 1.19x one.
SOFTMAX_P = 4.0

# Priors for GPUs whose datasheet rates are unknown (DeviceInfo rates 0): dense 16-bit
# tensor TFLOPS per SM and GB/s of DRAM per SM, by compute capability major.
_TFLOPS16_PER_SM = {7: 1.56, 8: 2.89, 9: 7.49, 10: 15.2, 12: 3.0}
_TFLOPS32_PER_SM = {7: 0.20, 8: 0.18, 9: 0.51, 10: 0.54, 12: 0.55}
_GBPS_PER_SM = {7: 11.3, 8: 18.9, 9: 25.4, 10: 54.0, 12: 10.0}


def _softmax(*xs: np.ndarray) -> np.ndarray:
    s = sum(np.power(np.maximum(x, 0.0), SOFTMAX_P) for x in xs)
    return np.power(s, 1.0 / SOFTMAX_P)


def _cdiv(a, b):
    return np.ceil(a / b)


class AnalyticModel:
    """Roofline / occupancy / pipelining model of device time; no training needed.

    ``predict(problem, choices)`` returns estimated milliseconds (lower is better),
    one per choice, in order. Works for any DeviceInfo: rates missing from it
    (0) are filled from per-SM priors by compute capability.

    Example::

        >>> from gemmtune.device import DeviceInfo
        >>> m = AnalyticModel(DeviceInfo.lookup("h100"))
        >>> p = Problem.from_sizes(4096, 4096, 4096, "bf16")
        >>> m.predict(p, ["aten"])[0] > m.predict(p.with_sizes(1024, 1024, 1024), ["aten"])[0]
        True
    """

    kind = "analytic"

    def __init__(self, device: DeviceInfo):
        if not isinstance(device, DeviceInfo):
            raise TypeError(f"AnalyticModel needs a DeviceInfo, not {type(device).__name__} "
                            "(use DeviceInfo.lookup('h100') on a CPU)")
        self.device = device
        major = device.capability[0]
        sm = max(1, device.sm_count)
        near = min(_TFLOPS16_PER_SM, key=lambda c: abs(c - major))
        self.sm_count = sm
        self.peak16 = (device.peak_tflops_16 or _TFLOPS16_PER_SM[near] * sm) * 1e12
        self.peak32 = (device.peak_tflops_32 or _TFLOPS32_PER_SM[near] * sm) * 1e12
        self.mem_bw = (device.mem_bw_gbps or _GBPS_PER_SM[near] * sm) * 1e9
        # Hopper's Triton uses wgmma (warp-group MMA) for large enough tiles; later
        # architectures have their own async MMA with the same shape rules.
        self.async_mma = major >= 9
        self.smem_sm = device.smem_per_block + 1024
        self.regs_sm = device.regs_per_sm
        self.l2 = device.l2_bytes or 40 * 2**20

    def __repr__(self) -> str:
        return f"AnalyticModel({self.device.name!r})"

    # ------------------------------------------------------------------ public
    def predict(self, problem: Problem, choices) -> list[float]:
        """Estimated device milliseconds per choice (lower is better)."""
        return self.predict_ms(problem, choices).tolist()

    def predict_ms(self, problem: Problem, choices, *, choice_batch: ChoiceBatch | None = None) -> np.ndarray:
        b = choice_batch if choice_batch is not None else batch(problem, choices)
        return self.breakdown(problem, b)["total"] * 1e3

    # ----------------------------------------------------------------- the model
    def breakdown(self, problem: Problem, b: ChoiceBatch) -> dict[str, np.ndarray]:
        """Every intermediate, in seconds (``total``, ``sm``, ``dram``, ``extra``) or counts."""
        n = len(b)
        f = np.float64
        es = float(element_size(problem.dtype))
        oes = float(element_size(problem.out_dtype))
        sm = float(self.sm_count)
        M, N, K = b.m.astype(f), b.n.astype(f), b.k.astype(f)
        aten = b.fam == ATEN
        bm = np.maximum(b.block_m, 16).astype(f)
        bn = np.maximum(b.block_n, 16).astype(f)
        bk = np.maximum(b.block_k, 16).astype(f)
        stages = np.maximum(b.stages, 1).astype(f)
        warps = np.maximum(b.warps, 1).astype(f)
        split = np.maximum(b.split, 1).astype(f)
        k_len = np.maximum(b.k_len, 1).astype(f)
        ua = ~b.aligned_a.astype(bool)
        ub = ~b.aligned_b.astype(bool)
        # bmm: ``nb`` products; a broadcast operand is one matrix, read once.
        nb = float(problem.batch)
        na_mat = 1.0 if problem.broadcast_a else nb
        nb_mat = 1.0 if problem.broadcast_b else nb

        # --- grid, occupancy, waves
        grid_m, grid_n = _cdiv(M, bm), _cdiv(N, bn)
        tiles = grid_m * grid_n * nb
        programs = tiles * split
        k_iters = _cdiv(k_len, bk)
        bytes_step = (bm * bk + bk * bn) * es
        smem = stages * bytes_step
        acc = bm * bn / (32 * warps)
        regs = np.minimum(255.0, acc + 48.0)
        occ = np.floor(np.minimum.reduce([
            self.smem_sm / smem, self.regs_sm / (regs * 32 * warps), 64.0 / warps,
            np.full(n, 32.0)]))
        # The persistent family runs one program per SM, walking its tiles in turn.
        occ = np.where(b.fam == PERSISTENT, 1.0, np.maximum(occ, 1.0))
        per_sm = _cdiv(programs, sm)
        rounds = _cdiv(per_sm, occ)
        conc = np.minimum(occ, per_sm)
        waves = programs / (sm * occ)
        wave_eff = programs / (np.ceil(waves) * sm * occ)

        # --- one K-step: math, operand traffic, narrow loads, latency
        fp32 = problem.dtype == "float32"
        # fp8 (scaled_mm): Hopper's fp8 tensor cores run at twice the 16-bit rate (H100 SXM:
        # 1979 against 989 dense TFLOPS); the bytes are already per element (es = 1).
        rate16 = 2.0 if problem.dtype in FP8_DTYPES else 1.0
        wgmma = self.async_mma & (bm >= 64) & (b.warps % 4 == 0)
        x3 = runs_3xtf32(problem)
        kmajor_pads = pads_b_kmajor_problem(problem)  # pad+ copies of B are K-major (implies x3)
        if fp32 and not problem.allow_tf32 and not x3:
            rate_sm = self.peak32 * EFF_FMA / sm * np.minimum(1.0, acc / FMA_ACC_KNEE) ** 0.25
            rate_sm = np.where(acc > FMA_SPILL_ACC, rate_sm / FMA_SPILL_FACTOR, rate_sm)
        else:
            # TF32 tensor cores run at half the 16-bit rate; 3xTF32 (precision.py) runs three
            # TF32 products per fp32 one.
            peak = self.peak16 * (0.5 / (3 if x3 else 1) if fp32 else rate16)
            rate_sm = peak / sm * np.where(wgmma, EFF_WGMMA, EFF_MMA)
            if x3:  # its operands' high and low parts share the registers with the accumulator
                rate_sm = np.where(acc > X3_SPILL_ACC, rate_sm / X3_SPILL_FACTOR, rate_sm)
                # the tile shapes that measured slow (X3_WIDE_WARPS_FACTOR and below)
                rate_sm = np.where(wgmma & (b.warps * 16 > bm), rate_sm / X3_WIDE_WARPS_FACTOR, rate_sm)
                rate_sm = np.where(bk <= 16, rate_sm / X3_BK16_FACTOR, rate_sm)
                rate_sm = np.where(bk <= 32, rate_sm / X3_BK32_FACTOR, rate_sm)
                rate_sm = np.where(wgmma & (occ * warps <= 4), rate_sm / X3_ONE_WARPGROUP_FACTOR, rate_sm)
                rate_sm = np.where(stages <= 2, rate_sm / X3_TWO_STAGE_FACTOR, rate_sm)
                if problem.layout_b.endswith("row"):  # X3_ROW_B_FACTOR; pad+ copies B K-major where it can
                    rate_sm = np.where((b.pad == 1) & kmajor_pads, rate_sm, rate_sm / X3_ROW_B_FACTOR)
        t_math = 2 * bm * bn * bk / rate_sm
        t_l2 = bytes_step / L2_SM_BW
        t_narrow = (bm * bk * ua + bk * bn * ub) * es / (UNALIGNED_SM_BW * es / 2)
        even_k = (K % bk == 0) & (k_len % bk == 0)
        pressure = acc + bk * (bm + bn) * es / (4 * 32 * warps)
        spill = np.where(even_k, 1.0, np.maximum(1.0, pressure / MASKED_REGS_KNEE) ** MASKED_REGS_POWER)
        t_busy = _softmax(t_math, t_l2, t_narrow) * spill
        t_wait = LATENCY_S / np.maximum(1.0, stages - 1) + bytes_step / PROGRAM_BW
        # skinny reduces its K-slices with the same fused epilogue as split-K
        splitk = ((b.fam == SPLITK) | (b.fam == SKINNY)) & (split > 1)
        t_prog = k_iters * np.maximum(t_wait, t_busy) + LATENCY_S + bm * bn * oes / PROGRAM_BW \
            + SYNC_S * splitk
        t_sm = np.maximum(rounds * t_prog, per_sm * k_iters * t_busy)

        # --- DRAM: operands per concurrent window of tiles, an operand in L2 read once
        a_bytes, b_bytes = M * K * es, K * N * es
        # (per matrix: a window of tiles never spans two matrices of a bmm)
        mat_tiles = grid_m * grid_n
        window = np.minimum(mat_tiles, np.maximum(1.0, np.floor(sm * conc / split)))
        g = np.maximum(b.group_m, 1).astype(f)
        wm0 = np.where(g > 1, np.minimum(grid_m, g), 1.0)
        wn = np.minimum(grid_n, _cdiv(window, wm0))
        wm = np.clip(np.floor(window / wn), wm0, grid_m)
        n_win = mat_tiles / (wm * wn)
        a_dram = np.where(a_bytes <= L2_FIT * self.l2, a_bytes, np.maximum(a_bytes, n_win * wm * bm * K * es))
        b_dram = np.where(b_bytes <= L2_FIT * self.l2, b_bytes, np.maximum(b_bytes, n_win * wn * bn * K * es))
        # bmm: each matrix's traffic, times the matrices; a broadcast operand stays in L2 when it fits.
        a_dram = np.where(na_mat < nb, a_dram + (nb - 1) * np.where(a_bytes <= L2_FIT * self.l2, 0.0, a_dram),
                          nb * a_dram)
        b_dram = np.where(nb_mat < nb, b_dram + (nb - 1) * np.where(b_bytes <= L2_FIT * self.l2, 0.0, b_dram),
                          nb * b_dram)
        out_bytes = M * N * oes * nb
        dk = b.fam == DECOMPOSE_K
        # DecomposeK's first kernel writes fp32 partials [split, M, N] instead of the output.
        c_dram = np.where(dk, split * M * N * 4.0, out_bytes)
        tile_f32 = bm * bn * 4.0
        det = splitk & (b.det == 1)
        t_dram = (a_dram + b_dram + c_dram) / (self.mem_bw * TRITON_DRAM_EFF)

        # --- what each family adds after the main loop
        extra = np.zeros(n)
        # Deterministic split-K: every partial is written and read back once (through
        # DRAM when they outgrow L2), and each tile's last program reads its partials in
        # turn: the busiest SM finishes ceil(tiles / SMs) such reductions.
        ws_bytes = np.where(det, 2.0 * programs * tile_f32, 0.0)
        extra += np.where(ws_bytes > L2_FIT * self.l2, ws_bytes / (self.mem_bw * DRAM_EFF),
                          ws_bytes / (L2_SM_BW * sm))
        extra += np.where(det, _cdiv(tiles, sm) * split * (DET_SLICE_S + tile_f32 / REDUCE_BW), 0.0)
        atomic = splitk & (b.det == 0)
        extra += np.where(atomic, programs * tile_f32 / (ATOMIC_SM_BW * sm) + tile_f32 / REDUCE_BW, 0.0)
        part_bytes = split * M * N * 4.0 * nb
        t_sum = np.maximum(part_bytes / (self.mem_bw * DRAM_EFF), split * SUM_SLICE_S) \
            + out_bytes / (self.mem_bw * DRAM_EFF)
        extra += np.where(dk, LAUNCH_S + t_sum, 0.0)

        tri_total = LAUNCH_S + _softmax(t_sm, t_dram) + extra

        # --- aten: a well-tuned library at the roofline
        flops = 2.0 * M * N * K * nb
        if fp32 and not problem.allow_tf32:
            rate = self.peak32 * ATEN_EFF_FP32
        else:
            rate = self.peak16 * (0.5 if fp32 else rate16) * ATEN_EFF
        min_bytes = a_bytes * na_mat + b_bytes * nb_mat + out_bytes
        aligned = ~(ua | ub)
        small_mn = (M <= 256) & (N <= 256) & (K >= 4096)
        t_aligned = _softmax(flops / rate, min_bytes / (self.mem_bw * DRAM_EFF)) + ATEN_SPLITK_S * small_mn
        t128 = _cdiv(M, 128) * _cdiv(N, 128) * nb
        splits = np.maximum(1, np.minimum(K // ATEN_UNALIGNED_SPLIT_K, np.ceil(sm / t128)))
        aten_tiles = t128 * splits  # cuBLAS's 128x128 tiles times its K splits (not the choice's tiles)
        fill = aten_tiles / (np.ceil(aten_tiles / sm) * sm)
        t_unaligned = flops / (rate * ATEN_UNALIGNED_EFF * fill) + min_bytes / (self.mem_bw * ATEN_UNALIGNED_BW)
        aten_total = LAUNCH_S + np.where(aligned, t_aligned, t_unaligned)

        total = np.where(aten, aten_total, tri_total)

        # --- pad+: copy both operands (K and N rounded up), and the output back when N grew
        if b.pad.any():
            m0, n0, k0 = problem.m, problem.n, problem.k
            a_copies = na_mat
            if kmajor_pads and problem.layout_a == "row" and problem.aligned_a:
                # (3xTF32 only, where the rankers' base may move) A is read as it is where K needs
                # no padding (kernels._unpadded_ok): no copy of it to charge
                a_copies = np.where(K == k0, 0.0, na_mat)
            copy_in = ((m0 * k0 + M * K) * a_copies + (k0 * n0 + K * N) * nb_mat) * es
            copy_out = np.where(N != n0, 2.0 * M * N * oes * nb, 0.0)
            t_pad = 2 * LAUNCH_S + copy_in / (self.mem_bw * PAD_BW_EFF) \
                + np.where(N != n0, LAUNCH_S, 0.0) + copy_out / (self.mem_bw * PAD_BW_EFF)
            pad_cost = np.where(b.pad == 1, t_pad, 0.0)
            total = total + pad_cost
            extra = extra + pad_cost

        zero = np.zeros(n)
        return {
            "total": total,
            "sm": np.where(aten, zero, t_sm),
            "dram": np.where(aten, min_bytes / (self.mem_bw * DRAM_EFF), t_dram),
            "extra": extra,
            "tiles": np.where(aten, 1.0, tiles),
            "programs": np.where(aten, 1.0, programs),
            "waves": np.where(aten, zero, waves),
            "wave_efficiency": np.where(aten, 1.0, wave_eff),
            "occupancy": np.where(aten, zero, occ),
            "k_iters": np.where(aten, 1.0, k_iters),
            "tile_intensity": np.where(aten, zero, 2 * bm * bn * bk / bytes_step),
            "smem": np.where(aten, zero, smem),
            "acc_regs": np.where(aten, zero, acc),
            "edge_efficiency": np.where(aten, 1.0, M * N * nb / (tiles * bm * bn)),
            "wgmma": np.where(aten, zero, wgmma.astype(f)),
        }
