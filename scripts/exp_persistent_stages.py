"""Deeper operand rings for persistent_tma on mid-size GEMMs: is the 5-stage cap of its space what
keeps it behind cuBLAS there? (#16)

Nsight Compute (benchmarks/results/2026-11-27-h100-s20, call 5) showed cuBLAS's kernels on these
problems keep 7-8 stages of 64x128 / 64x168 tiles in flight (213-225 KB of shared memory, 2-CTA
clusters, 3 warpgroups), where persistent_tma's space stops at 5 stages (139 KB for 64x128x64).
Per problem, this times persistent_tma configs of 4-8 stages (run through kernels.run_choice: pad+
where the problem is odd) beside cuBLAS, L2-cold from CUDA graphs (CudaGraphTimer, 3 input sets),
in interleaved rounds whose order rotates; each output is checked against fp64 first. bf16,
row-major A and B. GPU only.

    python scripts/exp_persistent_stages.py OUT.json [MxNxK ...]
"""
from __future__ import annotations

import json
import statistics
import sys

import torch

from gemmtune import kernels
from gemmtune.bench.timing import CudaGraphTimer
from gemmtune.configs import Choice
from gemmtune.problem import Problem

SHAPES = sys.argv[2:] or ["1000x1000x1000", "1024x1024x1024", "333x4097x1025", "777x1531x2049",
                          "512x4096x4096", "2048x2048x2048"]
TILES = ["BM64-BN128-BK64", "BM128-BN64-BK64", "BM128-BN128-BK64"]
STAGES = (4, 5, 6, 7, 8)
ROUNDS, SETS = 5, 3


def configs(problem: Problem) -> list[str]:
    """Every tile x stages x (W4, W8-WS) whose operand ring and output box fit (the family's
    own constraint, which has no stage cap)."""
    from gemmtune.device import current_or
    fam, dev = kernels.get("persistent_tma"), current_or()
    p = problem.padded() if not (problem.aligned_a and problem.aligned_b) else problem
    out = []
    for t in TILES:
        for s in STAGES:
            for w in ("W4-G8", "W8-G8-WS"):
                cid = f"persistent_tma:{t}-S{s}-{w}"
                if fam.constraint(Choice.parse(cid).config, p, dev) is None:
                    out.append(("pad+" if p is not problem else "") + cid)
    return out


def main() -> None:
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "shapes": {}}
    timer = CudaGraphTimer()
    for spec in SHAPES:
        m, n, k = (int(x) for x in spec.split("x"))
        problem = Problem.from_sizes(m, n, k, "bf16")
        g = torch.Generator(device="cuda").manual_seed(0)
        A = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(SETS)]
        B = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(SETS)]
        C = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
        ref = A[0].double() @ B[0].double()
        launches = {"aten": lambda i: torch.mm(A[i], B[i], out=C[i])}
        for cid in configs(problem):
            ch = Choice.parse(cid)
            launches[cid] = lambda i, ch=ch: kernels.run_choice(ch, A[i], B[i], C[i])
        errs = {}
        for name, fn in list(launches.items()):
            C[0].fill_(float("nan"))
            try:
                fn(0)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a config this triton cannot build is a result
                errs[name] = f"{type(e).__name__}: {e}"[:200]
                del launches[name]
                continue
            err = float((C[0].double() - ref).norm() / ref.norm())
            if not err < 1e-2:
                errs[name] = f"wrong output, rel err {err:.1e}"
                del launches[name]
        samples: dict[str, list[float]] = {x: [] for x in launches}
        names = list(launches)
        for r in range(ROUNDS):
            for name in names[r % len(names):] + names[:r % len(names)]:
                samples[name].append(timer.measure(launches[name], SETS).device_ms * 1e3)
        us = {x: statistics.median(v) for x, v in samples.items()}
        results["shapes"][spec] = {"us": us, "errors": errs}
        best = min((x for x in us if x != "aten"), key=us.get)
        print(f"{spec}: cuBLAS {us['aten']:.2f} us; best {best} {us[best]:.2f} us "
              f"({us['aten'] / us[best]:.2f}x); errors {len(errs)}", flush=True)
        for x in sorted(us, key=us.get)[:8]:
            print(f"    {us[x]:8.2f} us  {x}", flush=True)
        s5 = [x for x in us if "-S5-" in x or "-S4-" in x]
        if s5:
            b5 = min(s5, key=us.get)
            print(f"    best at <= 5 stages: {b5} {us[b5]:.2f} us", flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
