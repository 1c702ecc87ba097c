"""Markdown report of one GPU tuning run (+ the torch.compile run of the same call).

    python scripts/report_tune.py RUN_DIR [--title TEXT] > RUN_DIR/report.md

RUN_DIR holds what scripts/gpu_run.sh wrote: tune-summary.json (per shape, from the
store), tune-run.json (per-shape tuning wall time), env.txt, and optionally
inductor.json. Speedups are device-time ratios against cuBLAS measured in the same
process; a ratio whose difference is inside the larger of the two spreads is a tie.
"""

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("run_dir")
ap.add_argument("--title", default="gemmtune tune, default space")
args = ap.parse_args()
d = Path(args.run_dir)
summ = json.loads((d / "tune-summary.json").read_text())
run = json.loads((d / "tune-run.json").read_text())
ind = {r["key"]: r for r in json.loads((d / "inductor.json").read_text())["rows"]} \
    if (d / "inductor.json").exists() else {}
tune_s = {r["key"]: r["tune_s"] for r in run["shapes"]}
ctx = run["context"]


def geo(xs):
    xs = [x for x in xs if x and x == x]
    return f"{math.exp(sum(map(math.log, xs)) / len(xs)):.3f}" if xs else "-"


def us(ms):
    return f"{ms * 1e3:.2f}" if ms else "-"


print(f"# {args.title}\n")
print(f"{ctx['device_name']} (sm {ctx['capability']}), torch {ctx['torch_version']}, "
      f"triton {ctx['triton_version']}, gemmtune {ctx['gemmtune_version']}. Environment: "
      f"`{(d / 'env.txt').read_text().splitlines()[0]}`.\n")
print("Device time: median of 20 CUDA-graph replays, L2-cold (rotating inputs > 2x L2). "
      "Every candidate verified against fp64 first. `x` = cuBLAS time / gemmtune time, same "
      "process; `tie` when the difference is inside the measured spread (IQR/median). "
      "Inductor: torch.compile(mode='max-autotune-no-cudagraphs') with caches disabled, "
      "timed the same way in the same call (its cuBLAS column is its own measurement).\n")
hdr = ("| group | shape | M×N×K dtype | best choice | best µs | cuBLAS µs | x | candidates | tune s "
       "| Inductor tune s | Inductor µs | Inductor x |")
print(hdr)
print("|---" * (hdr.count("|") - 1) + "|")
groups = defaultdict(lambda: defaultdict(list))
tot_ours = tot_ind = 0.0
for r in summ["rows"]:
    key = r["key"]
    m, n, k = key.split(":")[1].replace("M", "").replace("N", "").replace("K", "").split("-")
    x = r["aten_ms"] / r["best_ms"] if r["best_ms"] and r["aten_ms"] else None
    spread = max(r.get("best_spread") or 0, r.get("aten_spread") or 0)
    tie = x is not None and r["best"] != "aten" and abs(r["aten_ms"] - r["best_ms"]) <= spread * r["aten_ms"]
    i = ind.get(key, {})
    ix = i["aten_ms"] / i["inductor_ms"] if i.get("inductor_ms") and i.get("aten_ms") else None
    ts = tune_s.get(key)
    its = f"{i['inductor_tune_s']:.1f}" if "inductor_tune_s" in i else "-"
    tot_ours += ts or 0
    tot_ind += i.get("inductor_tune_s", 0) or 0
    g = groups[r["group"]]
    g["ours"].append(x)
    g["ind"].append(ix)
    dtype = key.split(":")[2].split("->")[0]
    print(f"| {r['group']} | {r['name']} | {m}×{n}×{k} {dtype} | `{r['best']}` | {us(r['best_ms'])} | "
          f"{us(r['aten_ms'])} | {x:.2f}{' tie' if tie else ''} | {r['candidates']} | "
          f"{ts:.1f} | {its} | {us(i.get('inductor_ms'))} | "
          f"{f'{ix:.2f}' if ix else '-'} |")
print("\n| group | shapes | gemmtune x (geomean) | Inductor x (geomean) |\n|---|---|---|---|")
for name, g in groups.items():
    print(f"| {name} | {len(g['ours'])} | {geo(g['ours'])} | {geo(g['ind'])} |")
allo = [x for g in groups.values() for x in g["ours"]]
alli = [x for g in groups.values() for x in g["ind"]]
print(f"| all | {len(allo)} | {geo(allo)} | {geo(alli)} |")
print(f"\nTuning wall time, sum over shapes: gemmtune {tot_ours:.0f} s "
      f"({run['measured']} candidates, compiled in parallel), "
      + (f"Inductor max-autotune {tot_ind:.0f} s." if ind else "Inductor not run in this call."))
