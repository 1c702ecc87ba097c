"""Compile every config of the default spaces for sm_90 on this machine (no GPU: gemmtune.kernelinfo)
and list the ones that spill or use too many registers for two programs per SM, per problem.

    python scripts/survey_compile.py --out benchmarks/results/DATE-sm90-compile-survey [--shapes ...]
"""
import argparse
import json
import time
from pathlib import Path

import gemmtune
from gemmtune.kernelinfo import inspect_choice
from gemmtune.shapes import parse_shape

DEFAULT_SHAPES = ["4096x4096x4096:bf16", "1024x1024x1024:fp32", "300x20001x512:fp16", "64x64x65536:bf16",
                  "1x6144x4096:bf16:col", "16x4096x14336:bf16:col", "200x200x20000:bf16"]

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--shapes", nargs="*", default=DEFAULT_SHAPES)
ap.add_argument("--families", default="triton_mm,splitk,skinny,persistent_tma,triton_static")
ap.add_argument("--device", default="h100")
args = ap.parse_args()
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
rows = []
t0 = time.time()
for spec in args.shapes:
    parts = spec.split(":")
    layout_b = parts[2] if len(parts) > 2 else "row"
    import dataclasses
    p = dataclasses.replace(parse_shape(":".join(parts[:2])).problem, layout_b=layout_b)
    for fam in args.families.split(","):
        kept, _ = gemmtune.space(p, fam, "default", args.device, with_rejected=True)
        for c in kept:
            try:
                infos = inspect_choice(c, p, 90)
            except Exception as e:  # a compile error is a finding too
                rows.append({"shape": spec, "choice": c.id, "error": f"{type(e).__name__}: {str(e)[:200]}"})
                continue
            for i in infos:
                rows.append({"shape": spec, "choice": c.id, **i.row()})
        print(f"{spec} {fam}: {len(kept)} configs, {time.time() - t0:.0f} s", flush=True)
        (out / "survey.json").write_text(json.dumps(rows, indent=1))
spill = [r for r in rows if r.get("spill B")]
errors = [r for r in rows if "error" in r]
print(f"{len(rows)} kernels, {len(spill)} spilling, {len(errors)} compile errors")
