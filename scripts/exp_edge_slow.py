"""GPU: where a candidate that timed out on an edge shape spends its time (s18 call 3:
pad+skinny:BM16-BN256-BK128-SK1-S3-W4-dot-det on 1 x 1 x 65536 bf16, no answer within 30 s).
Wall times of the compile (the first call) and of later calls, each checked against fp64.

    python scripts/exp_edge_slow.py [CHOICE M N K]
"""
import sys
import time

import torch

import gemmtune

choice = sys.argv[1] if len(sys.argv) > 1 else "pad+skinny:BM16-BN256-BK128-SK1-S3-W4-dot-det"
m, n, k = (int(x) for x in sys.argv[2:5]) if len(sys.argv) > 4 else (1, 1, 65536)
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(k, n + 1, device="cuda", dtype=torch.bfloat16)[:, :n]  # row-major, unaligned
ref = a.double() @ b.double()
for i in range(3):
    t0 = time.perf_counter()
    out = gemmtune.matmul(a, b, choice=choice)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    err = ((out.double() - ref).norm() / ref.norm()).item()
    print(f"{choice} {m}x{n}x{k} call {i}: {dt * 1e3:.1f} ms wall, rel err {err:.2e}", flush=True)
