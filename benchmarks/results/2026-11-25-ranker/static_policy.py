"""triton_static in the tuner's selection: ranked on its own, or as a twin of its triton_mm config?

CPU only, from the committed store. 5-fold cross-validation by shape (the folds of
``gemmtune train --cv 5``); on each held-out problem that has measured triton_static choices,
two selections of cuBLAS plus the model's k best others, for k = 1 (``--fast``), 3 and 5:

* ``own``: the model (trained on the other folds, triton_static rows included) ranks every
  measured choice, triton_static too (tuning/plan.py with a model that ``knows`` triton_static);
* ``twin``: triton_static choices are not ranked; each picked triton_mm config brings its
  triton_static twin when that twin was measured (plan.py with any other model).

best fraction = best measured time of the problem / best measured time among the selection.
The store samples 8 triton_static configs per problem against 80 triton_mm ones, so most picked
triton_mm configs have no measured twin: ``twin`` here is close to "never static".

    PYTHONPATH=src python benchmarks/results/2026-11-25-ranker/static_policy.py [--kind lgbm_rank] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from gemmtune.device import DeviceInfo
from gemmtune.model import AnalyticModel
from gemmtune.model.cv import folds_by_group, shape_groups
from gemmtune.model.data import load_dataset
from gemmtune.model.metrics import rank_keys
from gemmtune.model.training import fit


def select(keys, choices, k, policy):
    base = [i for i, c in enumerate(choices) if c.family == "aten" and not c.pad]
    rest = [i for i, c in enumerate(choices) if not (c.family == "aten" and not c.pad)]
    twins = {}
    if policy == "twin":
        twins = {choices[i].config: i for i in rest if choices[i].family == "triton_static" and not choices[i].pad}
        rest = [i for i in rest if not (choices[i].family == "triton_static" and not choices[i].pad)]
    order = sorted(rest, key=lambda i: (keys[i], i))[:k]
    extra = [twins[choices[i].config] for i in order
             if choices[i].family == "triton_mm" and not choices[i].pad and choices[i].config in twins]
    return base + order + extra


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", default="data/collect/collect.sqlite.gz")
    ap.add_argument("--kind", default="lgbm_rank")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent))
    args = ap.parse_args()
    t0 = time.perf_counter()
    data = load_dataset(args.store)
    dev = DeviceInfo.lookup(data.context["device_name"])
    rows = []
    for fold in folds_by_group(data.shapes, shape_groups(), args.folds, 0):
        train_d, test_d = data.subset(data.shapes - fold), data.subset(fold).ranked()
        test_d.groups = [g for g in test_d.groups if any(c.family == "triton_static" for c in g.choices)]
        if not test_d.groups:
            continue
        model, _ = fit(train_d, kind=args.kind, seed=0, device=dev)
        for name, m in ((args.kind, model), ("analytic", AnalyticModel(dev))):
            for g in test_d.groups:
                keys = rank_keys(m, g.problem, g.choices)
                best = g.times_ms.min()
                st = [i for i, c in enumerate(g.choices) if c.family == "triton_static"]
                row = {"model": name, "key": g.problem.key, "static_best": bool(g.times_ms[st].min() <= best),
                       "static_vs_best": float(g.times_ms[st].min() / best)}
                for k in (1, 3, 5):
                    for pol in ("own", "twin"):
                        sel = select(keys, g.choices, k, pol)
                        row[f"{pol}_k{k}"] = float(best / g.times_ms[sel].min())
                        row[f"{pol}_k{k}_n"] = len(sel)
                        row[f"{pol}_k{k}_static"] = sum(g.choices[i].family == "triton_static" for i in sel)
                rows.append(row)
        print(f"fold done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    out = {"store": args.store, "kind": args.kind, "folds": args.folds, "wall_s": time.perf_counter() - t0,
           "problems": len({r["key"] for r in rows}), "summary": {}, "rows": rows}
    lines = ["| model | k | policy | best fraction geomean | min | >= 97% | candidates / problem | "
             "static timed / problem |", "|---|---:|---|---:|---:|---:|---:|---:|"]
    for name in (args.kind, "analytic"):
        rs = [r for r in rows if r["model"] == name]
        for k in (1, 3, 5):
            for pol in ("own", "twin"):
                f = np.array([r[f"{pol}_k{k}"] for r in rs])
                s = {"geomean": float(np.exp(np.log(f).mean())), "min": float(f.min()),
                     "at_least_97pct": float((f >= 0.97 - 1e-12).mean()),
                     "candidates_mean": float(np.mean([r[f"{pol}_k{k}_n"] for r in rs])),
                     "static_mean": float(np.mean([r[f"{pol}_k{k}_static"] for r in rs]))}
                out["summary"][f"{name} k={k} {pol}"] = s
                lines.append(f"| {name} | {k} | {pol} | {100 * s['geomean']:.1f}% | {100 * s['min']:.1f}% | "
                             f"{100 * s['at_least_97pct']:.1f}% | {s['candidates_mean']:.2f} | {s['static_mean']:.2f} |")
    nb = sum(r["static_best"] for r in rows if r["model"] == args.kind)
    lines.append(f"\n{out['problems']} held-out problems with triton_static timings; on {nb} of them a "
                 "triton_static choice is the best measured.")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "static_policy.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    (Path(args.out) / "static_policy.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
