"""#15: skinny strips with more warps on an SM, on decode layers of 8-34 MB (0.5-8B models at M = 1-16).

Call 1 of session 60 (benchmarks/results/2026-12-03-h200-s60): a streaming read of 8.4 / 16.8 / 33.6 MB
takes 4.1 / 6.2 / 9.7 us in the bench's harness, skinny's default tiles at M = 8 10.2 / 10.3 / 12.1 and
cuBLAS 7.1 / 8.6 / 12.4; Nsight Compute on the o_m8 strip (BM16-BN64-BK256-S5-W4, one 4-warp program an
SM on 64 SMs) shows it issue-bound, not waiting on memory (6.1 cycles between a warp's instructions, 2.3
of them fixed-latency dependencies; 4 warps an SM hide none of it). The default tiles were picked for
bytes in flight (deep pipelines of 32-64 KB stages, 4 warps); this sweep times tiles with shallow
pipelines and 8 warps, so that 2-6 programs share an SM, beside the whole default space and cuBLAS, in
one tune run (each choice verified against fp64 and timed by the bench's timer). Prints, per shape, the
default space's best, the sweep's best, cuBLAS and the floor, and which sweep tiles are near the best.

    python3 scripts/sessions/exp_decode_sweep.py --out DIR          (GPU only)
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from pathlib import Path

from gemmtune.configs import Choice, SkinnyConfig
from gemmtune.device import DeviceInfo
from gemmtune.kernels import skinny_spec
from gemmtune.problem import Problem
from gemmtune.table.types import LookupTable, TableChoice

SHAPES = ((8, 2048, 2048), (1, 2048, 2048), (4, 3072, 3072), (16, 5632, 2048), (8, 4096, 4096),
          (16, 2048, 8192))


def sweep(problem: Problem, device: DeviceInfo) -> list[SkinnyConfig]:
    """tl.dot strips with shallow pipelines and 4-8 warps, every K split that validates."""
    bm = max(16, 1 << max(0, (problem.m - 1).bit_length()))
    out = []
    for bn in (16, 32, 64):
        for bk in (128, 256):
            for w, st in ((4, 2), (4, 3), (8, 2), (8, 3)):
                for sk in (1, 2, 4):
                    cfg = SkinnyConfig(bm, bn, bk, sk, st, w, True, True)
                    if skinny_spec.constraint(cfg, problem, device) is None:
                        out.append(cfg)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    from gemmtune import tune
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    device = DeviceInfo.from_torch(0) if torch.cuda.is_available() else DeviceInfo.lookup("h200")
    problems, entries, default_ids = [], {}, {}
    for m, n, k in SHAPES if torch.cuda.is_available() else ((2, 64, 512),):
        p = Problem.from_sizes(m, n, k, "bf16", layout_b="col")
        kept = skinny_spec.space(p, device)[0]
        default_ids[p.key] = {"skinny:" + c.id for c in kept}
        ids = sorted(default_ids[p.key] | {"skinny:" + c.id for c in sweep(p, device)})
        ids = ids[:int(os.environ.get("SWEEP_LIMIT", len(ids)))]  # (a dry run on the CPU times a few)
        entries[p.key] = [TableChoice(Choice.parse(i)) for i in ["aten", *ids]]
        problems.append(p)
        print(f"{m}x{n}x{k}: {len(default_ids[p.key])} default + {len(ids) - len(default_ids[p.key])} sweep", flush=True)
    import triton
    from gemmtune import __version__
    from gemmtune.table.types import provenance
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu (Triton interpreter)"
    cap = "%d.%d" % torch.cuda.get_device_capability(0) if torch.cuda.is_available() else "interp"
    table = LookupTable(provenance(name, cap, torch.__version__, triton.__version__, __version__, "exp_decode_sweep"),
                        entries)
    store = out / "sweep.sqlite"
    tune(problems, families=("skinny", "aten"), store=str(store), table=table, progress=False,
         out=str(out / "sweep-table.json"))
    con = sqlite3.connect(store)
    report = []
    for p in problems:
        rows = con.execute("select choice_id, device_ms from results where problem_key=? and status='ok'",
                           (p.key,)).fetchall()
        t = {cid: ms * 1e3 for cid, ms in rows}
        cub = t.get("aten", float("nan"))
        dflt = {c: v for c, v in t.items() if c in default_ids[p.key]}
        swp = {c: v for c, v in t.items() if c != "aten" and c not in default_ids[p.key]}
        bd = min(dflt.items(), key=lambda kv: kv[1]) if dflt else (None, float("nan"))
        bs = min(swp.items(), key=lambda kv: kv[1]) if swp else (None, float("nan"))
        floor = (p.n * p.k + p.m * p.k + p.m * p.n) * 2 / 4368e3
        top = sorted(swp.items(), key=lambda kv: kv[1])[:8]
        line = {"shape": f"{p.m}x{p.n}x{p.k}", "floor_us": floor, "cublas_us": cub, "default_best": bd,
                "sweep_best": bs, "sweep_top8": top, "n_default": len(dflt), "n_sweep": len(swp)}
        report.append(line)
        print(f"{line['shape']:16s} floor {floor:6.2f} cuBLAS {cub:6.2f} default {bd[1]:6.2f} ({bd[0]}) "
              f"sweep {bs[1]:6.2f} ({bs[0]}) | sweep/default {bd[1] / bs[1]:.3f}x, sweep/cuBLAS {cub / bs[1]:.3f}x",
              flush=True)
        for cid, v in top:
            print(f"    {v:6.2f}  {cid}")
    (out / "sweep.json").write_text(json.dumps(report, indent=1))
    os.sync()


if __name__ == "__main__":
    main()
