"""torch.compile max-autotune on a shape suite: tuning wall time, kernel time, cuBLAS in the same run.

    python scripts/inductor_compare.py --preset public --out inductor.json [--limit N] [--group G]

For each shape: a fresh torch.compile(mode="max-autotune-no-cudagraphs") of one mm
(caches disabled, so its tuning is paid in full); its first call's wall time is the
tuning + compile time; its output is checked against fp64; then it and torch.mm are
timed by gemmtune's own CudaGraphTimer (L2-cold, median), side by side.
"""

import argparse
import json
import math
import time

import torch

from gemmtune.bench.runner import make_inputs
from gemmtune.bench.timing import CudaGraphTimer, sets_for
from gemmtune.device import DeviceInfo
from gemmtune.shapes import load_csv, preset
from gemmtune.verify import compare, tolerance

ap = argparse.ArgumentParser()
ap.add_argument("--preset", default="public")
ap.add_argument("--suite")
ap.add_argument("--out", required=True)
ap.add_argument("--limit", type=int)
ap.add_argument("--group")
ap.add_argument("--mode", default="max-autotune-no-cudagraphs")
args = ap.parse_args()

import torch._inductor.config as icfg  # noqa: E402

icfg.force_disable_caches = True
shapes = load_csv(args.suite) if args.suite else preset(args.preset)
if args.group:
    shapes = [s for s in shapes if s.group in args.group.split(",")]
shapes = shapes[: args.limit] if args.limit else shapes
dev = DeviceInfo.from_torch()
timer = CudaGraphTimer()
rows = []
for s in shapes:
    p = s.problem
    n = max(1, min(sets_for(p.min_bytes, dev.l2_bytes), (4 << 30) // max(p.min_bytes, 1)))
    sets = make_inputs(p, "cuda", n, seed=1)
    torch._dynamo.reset()
    f = torch.compile(lambda a, b: torch.mm(a, b), mode=args.mode, dynamic=False)
    row = {"group": s.group, "name": s.name, "key": p.key, "M": p.m, "N": p.n, "K": p.k, "dtype": p.dtype}
    try:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = f(*sets[0])
        torch.cuda.synchronize()
        row["inductor_tune_s"] = time.perf_counter() - t0
        chk = compare(out, torch.mm(sets[0][0].double(), sets[0][1].double()), tolerance(p))
        row["inductor_rel_err"] = chk.rel_err
        row["inductor_ok"] = chk.ok
        t = timer.measure(lambda i, s=sets: f(*s[i]), n)
        row.update(inductor_ms=t.device_ms, inductor_eager_ms=t.eager_ms, inductor_spread=t.spread)
    except Exception as e:  # a failed compile is a result too
        row["inductor_error"] = f"{type(e).__name__}: {e}"[:500]
    t = timer.measure(lambda i, s=sets: torch.mm(*s[i]), n)
    row.update(aten_ms=t.device_ms, aten_eager_ms=t.eager_ms, aten_spread=t.spread, repeats=t.repeats)
    rows.append(row)
    print(f"{s.group:8} {s.name:24} tune {row.get('inductor_tune_s', math.nan):6.1f} s  "
          f"inductor {row.get('inductor_ms', math.nan) * 1e3:8.2f} us  aten {row['aten_ms'] * 1e3:8.2f} us  "
          f"ok={row.get('inductor_ok')} {row.get('inductor_error', '')[:80]}", flush=True)
    del sets
    json.dump({"device": dev.name, "torch": torch.__version__, "mode": args.mode,
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows},
              open(args.out, "w"), indent=1)
tot = sum(r.get("inductor_tune_s", 0) for r in rows)
print(f"total inductor tuning+compile wall time: {tot:.1f} s over {len(rows)} shapes")
