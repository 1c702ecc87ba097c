#!/usr/bin/env python3
"""On a GPU, under Nsight Compute: our triton_mm, Inductor's mm template with the same config, and
cuBLAS, each launched once per shape inside one profiled range, so that ncu reads the three side by side
(duration, DRAM and L2 traffic, occupancy, launch geometry, warp stall reasons).

    ncu --profile-from-start off --set full --csv --page details \\
        python3 scripts/parity_ncu.py 512x4096x4096:bfloat16:BM64-BN128-BK64-S4-W4-G8 ... > ncu.csv

A fourth field names more forms of our kernel to profile beside the default launch, in order after
it: ``static_ik`` (sizes and strides compiled in, the K loop indexed from 0) and ``static_ik_wn``
(the same with an odd N wrapped, ``edge="wrap"``), e.g.
``333x4097x1025:bfloat16:BM64-BN128-BK64-S4-W4-G8:static_ik,static_ik_wn``. The profiled order per
shape: Inductor, ours, each named form, cuBLAS. ``PARITY_NO_ASSUME=1`` compiles ours without
tiled.py's ``tl.assume(pid_m >= 0, pid_n >= 0)`` (session 56's change), for an A/B.

Why: scripts/parity_inductor.py times ours 1.05-1.15x Inductor's on the same config, while the
compiled K loops are nearly identical (benchmarks/results/2026-11-25-parity-ir). The profiler
says where the time goes. Inductor is forced onto the config through gemmtune's lookup-table
export, as in parity_inductor.py; both outputs are checked against fp64 before profiling.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="gemmtune-ncu-"))

import torch  # noqa: E402


def main(specs: list[str]) -> int:
    import gemmtune.inductor_export as ie
    from gemmtune import kernels
    from gemmtune.configs import Choice
    from gemmtune.problem import DTYPES, Problem
    from gemmtune.table import LookupTable, TableChoice
    from gemmtune.verify import compare, tolerance

    sys.path.insert(0, str(ROOT / "scripts"))
    from parity_inductor import ie_provenance

    torch.backends.cuda.matmul.allow_tf32 = False
    fam = kernels.get("triton_mm")
    from gemmtune.kernels.tiled import launch_tiled, tile_kwargs
    if os.environ.get("PARITY_NO_ASSUME") == "1":  # session 56's A/B: ours without tiled.py's tl.assume
        import triton.language as tl

        from gemmtune.kernels import tiled
        tiled._HAS_ASSUME = tl.constexpr(False)
    forms_known = {"static_ik": {"static": True, "indexed_k": True},
                   "static_ik_wn": {"static": True, "indexed_k": True, "edge": "wrap"}}
    for spec in specs:
        size, dt, cfg, *more = spec.split(":")
        forms = [f for f in (more[0].split(",") if more else []) if f]
        unknown = [f for f in forms if f not in forms_known]
        if unknown:
            raise SystemExit(f"unknown forms {unknown} in {spec!r}; known: {', '.join(forms_known)}")
        m, n, k = (int(x) for x in size.split("x"))
        p = Problem.from_sizes(m, n, k, dt)
        choice = Choice.parse(f"triton_mm:{cfg}")
        a = torch.randn(m, k, device="cuda", dtype=DTYPES[p.dtype])
        b = torch.randn(k, n, device="cuda", dtype=DTYPES[p.dtype])
        out = torch.empty(m, n, device="cuda", dtype=a.dtype)
        ref = a.double() @ b.double()
        ie.install(LookupTable(ie_provenance(), {p.key: [TableChoice(choice, None)]}))
        torch._dynamo.reset()
        f = torch.compile(lambda x, y: torch.mm(x, y), mode="max-autotune-no-cudagraphs", dynamic=False)
        ok_i = compare(f(a, b), ref, tolerance(p)).ok
        fam.run(a, b, out, choice.config)
        ok_o = compare(out, ref, tolerance(p)).ok
        kw = {**tile_kwargs(choice.config, False), "k_per_split": k}
        launches = []
        for form in forms:
            out.zero_()
            launch_tiled(a, b, out, **kw, **forms_known[form])
            ok_f = compare(out, ref, tolerance(p)).ok
            print(f"{spec}: {form} ok {ok_f}", file=sys.stderr, flush=True)
            launches.append(lambda f=form: launch_tiled(a, b, out, **kw, **forms_known[f]))
        torch.mm(a, b)
        torch.cuda.synchronize()
        print(f"{spec}: inductor ok {ok_i}, ours ok {ok_o}", file=sys.stderr, flush=True)
        torch.cuda.profiler.start()
        f(a, b)
        fam.run(a, b, out, choice.config)
        for launch in launches:
            launch()
        torch.mm(a, b, out=out)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
