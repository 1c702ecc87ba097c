#!/usr/bin/env python3
"""Offline (no GPU): which piece of our tiled kernel, put into scripts/parity_ir.py's stand-in for
Inductor's mm template, changes ptxas's schedule of the K loop (session h2-ptxas).

    PYTHONPATH=src python scripts/exp_ptxas_order.py [F ...]   # default: 0 1 2 4 8 16 32 64 31

Bits of F switch ours' pieces on in the stand-in: 1 ours' pid_m formula, 2 no tl.assume on
pid_m / pid_n (32: none on pid_m only, 64: none on pid_n only), 4 no hints on A's wrapped rows,
8 ours' offset form (lead * stride with multiple_of, + k), 16 ours' epilogue (rm / rn reused,
explicit cast). Prints each variant's registers and K loop order (parity_ir.loop_order).
Result on 512x4096x4096 bf16, BM64-BN128-BK64-S4-W4-G8, sm_90a, triton 3.6: only 2 and 64 flip
it (96 registers, the arrive at 19, the 12 LDGSTS spanning 41 instructions, as ours was; else
112, 26 and 27): without ``tl.assume(pid_n >= 0)`` the column offsets ``rn % N`` are a signed
remainder and B's addresses are formed differently outside the loop. Compile facts, not timings.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import parity_ir as P  # noqa: E402


@triton.jit
def standin_f(A, B, out_ptr0, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
              stride_am: tl.constexpr, stride_ak: tl.constexpr, stride_bk: tl.constexpr, stride_bn: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, F: tl.constexpr):
    pid = tl.program_id(0).to(tl.int32)
    grid_m = (M + BLOCK_M - 1) // BLOCK_M
    grid_n = (N + BLOCK_N - 1) // BLOCK_N
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = tl.minimum(grid_m - group_id * GROUP_M, GROUP_M)
    if F & 1:   # ours' pid_m
        pid_m = group_id * GROUP_M + (pid % width) % group_size
    else:
        pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // group_size
    if not (F & 2):  # ours has no assume
        if not (F & 32):
            tl.assume(pid_m >= 0)
        if not (F & 64):
            tl.assume(pid_n >= 0)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if F & 4:   # ours: no hints on A's wrapped rows
        offs_a_m = rm % M
    else:
        offs_a_m = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    offs_b_n = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_idx in range(0, tl.cdiv(K, BLOCK_K)):
        if F & 8:   # ours' offsets: lead * stride with multiple_of hints, + kk
            kk = k_idx * BLOCK_K + offs_k
            a_lead = tl.multiple_of(offs_a_m[:, None] * stride_am, [16, 16])
            b_lead = tl.multiple_of(kk[:, None] * stride_bk, [16, 16])
            pa = A + (a_lead + kk[None, :])
            pb = B + (b_lead + offs_b_n[None, :])
        else:
            a_k = offs_k[None, :] + k_idx * BLOCK_K
            b_k = offs_k[:, None] + k_idx * BLOCK_K
            pa = A + (a_k * stride_ak + offs_a_m[:, None] * stride_am)
            pb = B + (offs_b_n[None, :] * stride_bn + b_k * stride_bk)
        a = tl.load(pa)
        b = tl.load(pb)
        acc += tl.dot(a, b, allow_tf32=False, out_dtype=tl.float32)
    if F & 16:  # ours' epilogue: reuse rm/rn, c_rows + rn, mask, cast
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(out_ptr0 + (rm[:, None] * N + rn[None, :]), acc.to(out_ptr0.dtype.element_ty), mask=mask)
    else:
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        idx_m = rm[:, None]
        idx_n = rn[None, :]
        mask = (idx_m < M) & (idx_n < N)
        tl.store(out_ptr0 + tl.broadcast_to(idx_n + N * idx_m, acc.shape), acc, mask)


shape = "512x4096x4096"
flags = [int(x) for x in sys.argv[1:]] or [0, 1, 2, 4, 8, 16, 32, 64, 31]
M, N, K = map(int, shape.split("x"))
a, b, c = (torch.empty(r, s, dtype=torch.bfloat16) for r, s in ((M, K), (K, N), (M, N)))
out = Path(P.tempfile.gettempdir()) / "ptxas-order"
for f in flags:
    fn, grid, args, kw = P.inductor_launch(a, b, c, 64, 128, 64, 8, 4, 4)
    info = P.compile_one(standin_f, grid, args, {**kw, "F": f}, 90)
    row = P.analyse(f"standin_f{f}", info, out)
    print(f"F={f:2d}: regs {info.registers}  {row['sass_loop_order']}", flush=True)
