"""GPU check (seconds): are the split-K kernels' outputs the same from call to call, and is a
CUDA-graph replay the same as the call it captured? The atomic reduction adds fp32 partials in
whatever order the programs arrive; the deterministic one in a fixed order. bench-model's graph
mode saw a replayed patch + compile decode step differ from the un-graphed call by 8.3e-3
(relative, logits of Llama-1B); this says whether the kernels themselves differ between calls.

    python scripts/determinism_check.py
"""

from __future__ import annotations

import torch

from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.kernels.splitk import SplitKWorkspace

CASES = [  # (M, N, K, choice): Llama-1B decode GEMMs and the winners tuned for them
    (1, 512, 2048, "skinny:BM16-BN16-BK256-SK8-S6-W2-dot-atomic"),
    (1, 2048, 8192, "skinny:BM16-BN32-BK128-SK4-S4-W2-dot-atomic"),
    (1, 512, 2048, "skinny:BM16-BN16-BK256-SK8-S6-W2-dot-det"),
    (64, 64, 65536, "splitk:BM64-BN64-BK64-S4-W4-G8-SK32-atomic"),
    (64, 64, 65536, "splitk:BM64-BN64-BK64-S4-W4-G8-SK32-det"),
    # the deterministic split-K's two paths (kernels.splitk.split_mode): 128 programs, one wave on an
    # H100/H200, take the parallel fixup (SPLIT_MODE 3); 256 programs the last arriver's sum (mode 1)
    (128, 128, 32768, "splitk:BM64-BN64-BK128-S3-W4-G8-SK32-det"),
    (200, 200, 20000, "splitk:BM64-BN64-BK64-S4-W4-G8-SK16-det"),
]


def main() -> None:
    torch.manual_seed(0)
    for m, n, k, cid in CASES:
        choice = Choice.parse(cid)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t()  # x @ W.T, the Linear case
        ws = SplitKWorkspace()
        outs = []
        for _ in range(20):
            o = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            kernels.run_choice(choice, a, b, o, workspace=ws)
            outs.append(o)
        torch.cuda.synchronize()
        differ = sum(not torch.equal(outs[0], x) for x in outs[1:])
        ref = (a.double() @ b.double())
        err = float((outs[0].double() - ref).norm() / ref.norm())
        g_out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            kernels.run_choice(choice, a, b, g_out, workspace=ws)
        rdiff = 0
        for _ in range(20):
            g.replay()
            torch.cuda.synchronize()
            rdiff += not torch.equal(g_out, outs[0])
        print(f"{m}x{n}x{k} {cid}: rel err vs fp64 {err:.1e}; {differ}/19 calls differ bitwise from the first; "
              f"{rdiff}/20 graph replays differ from it", flush=True)


if __name__ == "__main__":
    main()
