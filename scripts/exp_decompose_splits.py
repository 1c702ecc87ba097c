#!/usr/bin/env python3
"""GPU experiment (#15, splitk group): DecomposeK's every split count against the fused split-K's
default space and cuBLAS, on small M x N with a long K. Inductor's max-autotune picked DecomposeK
with 112 splits on 32x32x28672 bf16 (5.94 us, H100, session 23 call 5), a split count gemmtune's
default space never lists (its first 6 powers of two: at most 64 programs on 132 SMs).

    python scripts/exp_decompose_splits.py --out $OUT/decompose_splits.json

Tunes each shape with decompose_k's exhaustive space and splitk's and aten's default ones (the
tuner: verification against fp64 and L2-cold CUDA-graph timing), then prints every decompose_k
split's time, the best split-K and cuBLAS.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SHAPES = [(32, 32, 28672), (64, 64, 65536), (128, 128, 32768), (256, 256, 16384), (32, 4096, 16384),
          (512, 512, 131072), (200, 200, 20000), (48, 96, 49152)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import gemmtune
    from gemmtune.problem import Problem
    from gemmtune.store import ResultStore

    store_path = Path(tempfile.mkdtemp()) / "s.sqlite"
    probs = [Problem.from_sizes(m, n, k, "bfloat16") for m, n, k in SHAPES]
    gemmtune.tune(probs, families=["decompose_k"], space="exhaustive", store=str(store_path), progress=False)
    gemmtune.tune(probs, families=["splitk", "aten"], space="default", store=str(store_path), progress=False)
    store = ResultStore(str(store_path))
    out = {}
    for p in probs:
        rows = [r for _, r in store.rows(problem_key=p.key, status="ok")]
        by = {r.choice_id: r.device_ms for r in rows}
        dk = sorted(((int(c.split(":s")[-1]), ms) for c, ms in by.items() if c.startswith("decompose_k:")))
        sk = min(((ms, c) for c, ms in by.items() if c.startswith("splitk:")), default=(None, None))
        out[p.key] = {"decompose_k": dk, "best_splitk": sk, "aten": by.get("aten")}
        best_dk = min(dk, key=lambda t: t[1]) if dk else None
        print(f"{p.m}x{p.n}x{p.k}: aten {by.get('aten', 0) * 1e3:.2f} us  best splitk {sk[0] * 1e3 if sk[0] else 0:.2f} "
              f"({sk[1]})  best decompose_k s{best_dk[0]} {best_dk[1] * 1e3:.2f} us" if best_dk else "", flush=True)
        print("   decompose_k: " + " ".join(f"s{s}:{ms * 1e3:.2f}" for s, ms in dk), flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
