"""Session 58 experiment (GPU): cuBLAS (torch.mm) on the same unaligned-key shapes with B's data pointer
shifted by one element (what gemmtune's benchmark operands were until session 58) and with the pointer
torch.randn gives (what a model passes, and the benchmark's operands since). L2-cold CUDA graphs
(CudaGraphTimer), the two interleaved over 3 rounds, each checked against fp64.

    python scripts/sessions/exp_shifted_ptr.py
"""
from __future__ import annotations

import statistics

import torch

from gemmtune.bench.timing import CudaGraphTimer, sets_for

SHAPES = [(8192, 1, 4096, "row"), (1536, 1, 5120, "row"), (16384, 4, 2048, "row"), (4096, 2, 4096, "row"),
          (6000, 2, 8192, "col"), (1360, 3, 18944, "col"), (2305, 8, 7168, "row")]


def operand(rows, cols, layout, shift, gen):
    n = rows * cols + shift
    flat = torch.randn(n, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)[shift:]
    return flat.view(rows, cols) if layout == "row" else flat.view(cols, rows).t()


def main() -> None:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    timer = CudaGraphTimer(replays=10)
    for m, n, k, lb in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(m + n + k)
        sets = sets_for(2 * (m * k + k * n + m * n), l2)
        res = {}
        data = {}
        for tag, shift in (("shifted", 1), ("torch.randn", 0)):
            data[tag] = [(operand(m, k, "row", 0, g), operand(k, n, lb, shift, g),
                          torch.empty(m, n, device="cuda", dtype=torch.bfloat16)) for _ in range(sets)]
            a, b, out = data[tag][0]
            torch.mm(a, b, out=out)
            err = ((out.double() - a.double() @ b.double()).abs().max()).item()
            assert err < 0.05 * (a.double() @ b.double()).abs().max().item(), (m, n, k, tag, err)
            res[tag] = []
        for _ in range(3):
            for tag, d in data.items():
                res[tag].append(timer.measure(lambda i, d=d: torch.mm(d[i][0], d[i][1], out=d[i][2]), sets).device_ms * 1e3)
        med = {t: statistics.median(v) for t, v in res.items()}
        print(f"{m}x{n}x{k} B {lb}: cuBLAS shifted B {med['shifted']:.2f} us, torch.randn's B {med['torch.randn']:.2f} us "
              f"({med['shifted'] / med['torch.randn']:.2f}x)", flush=True)
        del data


if __name__ == "__main__":
    main()
