"""GPU experiment (one device call): which tile wins fp32 (TF32 off, 3xTF32) on large problems.

Sessions 49 and 50 (H200, `gemmtune bench` against SGEMM) found the default space's best on large
fp32 problems with a row-major B to be a K split by two (``pad+decompose_k:s2`` and
``pad+splitk:BM128-BN128-BK64-S3-W8-G8-SK2-det``: 4096^3 1498 us, against 1665 for triton_mm's best,
``BM128-BN64-BK32-S4-W8-G8``). Both run the tile BM128-BN128-BK64, 3 stages, 8 warps, which
triton_mm's default space does not hold (it has that tile with 4 warps). Question: is the split
the gain, or the tile? Every choice below is timed by ``gemmtune.tune`` (the standard timer: CUDA
graphs, L2-cold, fp64-verified) with a lookup table that fixes the candidates, per shape, on the
shapes those sessions measured and on three that no session has.

    python scripts/exp_x3_tiles.py --out DIR      # GPU
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

SHAPES = [  # (M, N, K, layout_b); the last three are out of sample
    (4096, 4096, 4096, "row"), (2048, 2048, 2048, "row"), (1024, 4096, 4096, "row"),
    (3000, 5120, 1280, "row"), (2048, 3072, 768, "row"), (4096, 4096, 4096, "col"),
    (1536, 6144, 2560, "row"), (8192, 1024, 4096, "col"), (2500, 2500, 5000, "row"),
]
TILES = ["triton_mm:BM128-BN128-BK64-S3-W8-G8", "triton_mm:BM128-BN128-BK64-S3-W4-G8",
         "triton_mm:BM128-BN128-BK64-S2-W8-G8", "triton_mm:BM128-BN128-BK32-S3-W8-G8",
         "triton_mm:BM128-BN128-BK32-S4-W8-G8", "triton_mm:BM128-BN64-BK32-S4-W8-G8",
         "triton_mm:BM256-BN128-BK32-S3-W8-G8", "triton_mm:BM128-BN256-BK32-S3-W8-G8",
         "splitk:BM128-BN128-BK64-S3-W8-G8-SK2-det", "decompose_k:s2"]
# --set warpgroup (session 50, call 4): one warp group an SM under 3xTF32 (model.analytic's
# X3_ONE_WARPGROUP_FACTOR): 4-warp wgmma tiles whose fp32 stages allow one program an SM (147 KB,
# 196 KB; a persistent program is one an SM by design) against 4-warp tiles of which an SM holds
# three (73 KB) and the 8-warp tile that won call 2.
WARPGROUP_SHAPES = [(4096, 4096, 4096, "col"), (1951, 10240, 3072, "col"), (704, 5120, 768, "col"),
                    (3000, 5120, 1280, "row"), (224, 1536, 3072, "col")]
WARPGROUP_TILES = ["triton_mm:BM64-BN128-BK64-S3-W4-G8", "triton_mm:BM64-BN64-BK128-S3-W4-G8",
                   "triton_mm:BM64-BN128-BK32-S3-W4-G8", "triton_mm:BM128-BN64-BK32-S3-W4-G8",
                   "triton_mm:BM128-BN128-BK64-S3-W8-G8", "persistent_tma:BM128-BN128-BK32-S5-W4-G8",
                   "persistent_tma:BM128-BN128-BK32-S5-W8-G8", "persistent_tma:BM64-BN64-BK128-S3-W4-G8"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--set", choices=("split", "warpgroup"), default="split",
                    help="split: call 2's tiles and K splits (default); warpgroup: one warp group an SM")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch
    import triton
    if os.environ.get("X3_SMOKE"):
        torch.cuda.get_device_name = lambda: "cpu (Triton interpreter)"
        torch.cuda.get_device_capability = lambda: ("interp",)

    import gemmtune
    from gemmtune.configs import Choice
    from gemmtune.problem import Problem
    from gemmtune.table import LookupTable, TableChoice, provenance

    shapes, tiles = (SHAPES, TILES) if args.set == "split" else (WARPGROUP_SHAPES, WARPGROUP_TILES)
    if os.environ.get("X3_SMOKE"):  # a CPU check of the script
        shapes = [(33, 64, 48, "row")]
    probs = [Problem.from_sizes(m, n, k, "fp32", layout_b=lb) for m, n, k, lb in shapes]
    cap = ".".join(map(str, torch.cuda.get_device_capability()))
    entries = {}
    for p in probs:
        # a row-major B is read K-major through pad+ (precision.pads_b_kmajor); a column-major one as it is
        ids = ["aten"] + [("pad+" if p.layout_b == "row" else "") + t for t in tiles]
        entries[p.key] = [TableChoice(Choice.parse(i)) for i in ids]
    lut = LookupTable(provenance(torch.cuda.get_device_name(), cap, torch.__version__, triton.__version__,
                                 gemmtune.__version__, "by-hand"), entries)
    r = gemmtune.tune(probs, store=str(args.out / "x3tiles.sqlite"), table=lut, progress=False, timeout=120)
    # (a store of its own per --set: --out names the directory)
    from gemmtune.store import ResultStore
    rows = {}
    with ResultStore(args.out / "x3tiles.sqlite") as st:
        for _, row in st.rows(status="ok"):
            rows.setdefault(row.problem_key, {})[row.choice_id] = row.device_ms * 1e3
    out = []
    for p in probs:
        times = rows.get(p.key, {})
        base = times.get("aten")
        print(f"\n{p.m}x{p.n}x{p.k} B={p.layout_b}  (cuBLAS SGEMM {base:.1f} us)" if base else f"\n{p.key}: no aten")
        for cid, us in sorted(times.items(), key=lambda kv: kv[1]):
            print(f"  {cid:55s} {us:9.1f} us  {base / us if base else float('nan'):5.2f}x")
        out.append({"m": p.m, "n": p.n, "k": p.k, "layout_b": p.layout_b, "us": times})
    (args.out / "x3tiles.json").write_text(json.dumps(out, indent=1))
    print(f"\nfailed candidates: {sum(s.failed for s in r.shapes)}; "
          f"{'; '.join(f'{s.problem.key}: {s.reasons}' for s in r.shapes if s.failed)}")


if __name__ == "__main__":
    main()
