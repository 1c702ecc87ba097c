"""Which kernel cuBLAS runs, and how it and gemmtune's choices use the GPU, on chosen problems.

    python scripts/probe_kernels.py names MxNxK ...            # cuBLAS's kernel names and times
    ncu --profile-from-start off --section SpeedOfLight --section LaunchStats --section Occupancy \\
        --section WarpStateStats --csv python scripts/probe_kernels.py ncu MxNxK:CHOICE ...

``names``: each problem's torch.mm under torch.profiler: the kernels it launched (cuBLAS's name
spells its tile, cluster and stages) with their device times. ``ncu``: each MxNxK:CHOICE (a
gemmtune choice id, ``aten`` for cuBLAS) launched twice inside one profiled range after an
unprofiled warm-up, its output checked against fp64 first. bf16, row-major A and B. GPU only.
"""
from __future__ import annotations

import sys

import torch

from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.kernels.splitk import SplitKWorkspace


def sizes(text: str) -> tuple[int, int, int]:
    m, n, k = (int(x) for x in text.split("x"))
    return m, n, k


def operands(m: int, n: int, k: int):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g)
    return a, b, torch.empty(m, n, device="cuda", dtype=torch.bfloat16)


def names(specs: list[str]) -> None:
    from torch.profiler import ProfilerActivity, profile
    for spec in specs:
        a, b, out = operands(*sizes(spec))
        for _ in range(3):
            torch.mm(a, b, out=out)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                torch.mm(a, b, out=out)
            torch.cuda.synchronize()
        seen: dict[str, list[float]] = {}
        for e in prof.events():
            if e.device_type.name == "CUDA":
                seen.setdefault(e.name, []).append(e.device_time_total)
        for name, us in seen.items():
            print(f"{spec}: {sorted(us)[len(us) // 2]:8.2f} us  x{len(us)}  {name}", flush=True)


def ncu(specs: list[str]) -> None:
    ws = SplitKWorkspace()
    runs = []
    for spec in specs:
        shape, choice_id = spec.split(":", 1)
        a, b, out = operands(*sizes(shape))
        choice = Choice.parse(choice_id)
        run = (lambda a=a, b=b, out=out: torch.mm(a, b, out=out)) if choice_id == "aten" else (
            lambda a=a, b=b, out=out, c=choice: kernels.run_choice(c, a, b, out, workspace=ws))
        run()
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        err = float((out.double() - ref).norm() / ref.norm())
        print(f"{spec}: rel err {err:.1e}", flush=True)
        if not err < 1e-2:
            raise SystemExit(f"{spec}: wrong output (rel err {err:.1e})")
        runs.append(run)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for run in runs:
        for _ in range(2):
            run()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    {"names": names, "ncu": ncu}[sys.argv[1]](sys.argv[2:])
