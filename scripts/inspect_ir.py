"""Compile a few choices on the GPU and count what their Triton IR holds: asynchronous copies
(software pipelining), wgmma / mma, shared-memory buffers; registers and spills from the binary.

    python scripts/inspect_ir.py skinny:BM16-BN64-BK256-SK1-S4-W4-dot-det ... [--shape 1x6144x4096]
"""
import argparse
import re

import torch

from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.kernels.splitk import SplitKWorkspace

ap = argparse.ArgumentParser()
ap.add_argument("choices", nargs="+")
ap.add_argument("--shape", default="1x6144x4096")
args = ap.parse_args()
m, n, k = map(int, args.shape.split("x"))
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
ws = SplitKWorkspace()
for cid in args.choices:
    ch = Choice.parse(cid)
    ck = kernels.get(ch.family).run(a, b, out, ch.config, workspace=ws)
    ttgir = ck.asm.get("ttgir", "")
    counts = {pat: len(re.findall(pat, ttgir)) for pat in
              ("async_copy_global_to_local", "async_wait", "warp_group_dot", "ttng.wgmma", "tt.dot", "local_alloc",
               "scf.for", "scf.while")}
    print(f"{cid}: regs {getattr(ck, 'n_regs', '?')} spills {getattr(ck, 'n_spills', '?')} "
          f"smem {ck.metadata.shared if hasattr(ck.metadata, 'shared') else '?'} | "
          + " ".join(f"{k}={v}" for k, v in counts.items() if v))
