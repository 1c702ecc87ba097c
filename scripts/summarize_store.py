"""Per-shape summary of a results store: best choice vs cuBLAS, candidates, failures.

    python scripts/summarize_store.py STORE.sqlite OUT.json
"""

import json
import math
import sys
from collections import Counter, defaultdict

from gemmtune.shapes import preset
from gemmtune.store import ResultStore

store, out = sys.argv[1], sys.argv[2]
tune_s = {}
if len(sys.argv) > 3:  # the tune run's --summary JSON: per-shape tuning wall time
    tune_s = {r["key"]: r["tune_s"] for r in json.load(open(sys.argv[3]))["shapes"]}
names = {s.problem.key: (s.group, s.name) for s in preset("public")}
by = defaultdict(list)
ctx0 = None
with ResultStore(store) as st:
    for ctx, r in st.rows():
        by[r.problem_key].append(r)
        ctx0 = ctx
rows = []
for key, rs in by.items():
    ok = [r for r in rs if r.status == "ok" and r.device_ms and math.isfinite(r.device_ms)]
    best = min(ok, key=lambda r: r.device_ms) if ok else None
    aten = next((r for r in rs if r.choice_id == "aten" and r.status == "ok"), None)
    fam_best = {}
    for r in ok:
        if r.family not in fam_best or r.device_ms < fam_best[r.family].device_ms:
            fam_best[r.family] = r
    g, n = names.get(key, ("?", key))
    rows.append({"group": g, "name": n, "key": key, "candidates": len(rs),
                 "statuses": dict(Counter(r.status for r in rs)),
                 "best": best.choice_id if best else None, "best_ms": best.device_ms if best else None,
                 "best_spread": best.spread if best else None,
                 "aten_ms": aten.device_ms if aten else None, "aten_spread": aten.spread if aten else None,
                 "aten_eager_ms": aten.eager_ms if aten else None,
                 "best_eager_ms": best.eager_ms if best else None,
                 "tune_s": tune_s.get(key),
                 "family_best_ms": {f: r.device_ms for f, r in fam_best.items()}})
order = {k: i for i, k in enumerate(names)}
rows.sort(key=lambda r: order.get(r["key"], 1e9))
json.dump({"context": ctx0.__dict__ if ctx0 else None, "rows": rows}, open(out, "w"), indent=1)
print(f"{'group':8} {'name':24} {'best choice':52} {'best us':>8} {'aten us':>8} {'x':>6} {'n':>4} {'fail':>4} {'tune s':>6}")
geo = defaultdict(list)
for r in rows:
    sp = r["aten_ms"] / r["best_ms"] if r["best_ms"] and r["aten_ms"] else float("nan")
    geo[r["group"]].append(sp)
    fail = sum(v for k, v in r["statuses"].items() if k != "ok")
    print(f"{r['group']:8} {r['name']:24} {str(r['best']):52} {r['best_ms']*1e3 if r['best_ms'] else float('nan'):8.2f} "
          f"{r['aten_ms']*1e3 if r['aten_ms'] else float('nan'):8.2f} {sp:6.2f} {r['candidates']:4} {fail:4} "
          f"{r['tune_s'] if r['tune_s'] is not None else float('nan'):6.1f}")
for g, v in geo.items():
    v = [x for x in v if x == x]
    if v:
        print(f"geomean speedup over aten, {g}: {math.exp(sum(map(math.log, v)) / len(v)):.3f} ({len(v)} shapes)")
