"""Does the H200 ranker rank the classes its store lacked, and what teaches it best? (session 21)

The H200 store (data/collect/collect.sqlite.gz before session 21: "old") held no odd-vocabulary
heads, few small-N and no huge-K problems; the H100 store has them (sessions 17-20). Session 21's
call 1 measured 55 of those problems on an H200 ("new"). Every model below is scored on the new
H200 problems only (cv.score: top-1 within 10% of the best measured, top-5 regret), by:

* shipped: the H200 ranker in src/gemmtune/data/models (trained on old);
* base: retrained on old here (the control for retraining);
* pooled-a: old + every H100 problem, each featurized with its own GPU (the H100 store holds
  the same shapes, measured on the other GPU: what a pooled ranker would know in practice);
* pooled-b: old + the H100 problems whose (M, N, K) is not among the new ones (transfer only);
* fresh: old + the new H200 problems outside the scored fold (5 folds over the new shapes);
* fresh+pooled-b: fresh + the H100 problems whose shape is not in the scored fold.

    git show 7630742:data/collect/collect.sqlite.gz > /tmp/h200-old.sqlite.gz   # the store before session 21
    mkdir -p /tmp/h200-old && for f in json lgbm.txt; do      # and the ranker shipped from it
      git show 7630742:src/gemmtune/data/models/nvidia-h200-rank.$f > /tmp/h200-old/nvidia-h200-rank.$f; done
    PYTHONPATH=src python scripts/exp_h200_transfer.py NEW_STORE --old /tmp/h200-old.sqlite.gz \
      --shipped /tmp/h200-old/nvidia-h200-rank.json [--out DIR]
"""
import argparse
import json
import os
import time

from gemmtune.device import DeviceInfo
from gemmtune.model import cv as cvmod
from gemmtune.model import training
from gemmtune.model.data import Dataset, load_dataset, pool
from gemmtune.model.learned import LearnedModel

ap = argparse.ArgumentParser()
ap.add_argument("new_store")
ap.add_argument("--old", required=True, help="the H200 store before session 21's rows (see above)")
ap.add_argument("--h100", default="data/collect/h100/collect.sqlite.gz")
ap.add_argument("--shipped", required=True, help="the H200 ranker shipped before session 21 (see above)")
ap.add_argument("--folds", type=int, default=5)
ap.add_argument("--out", default=None)
args = ap.parse_args()

old, new_all, h100 = load_dataset(args.old), load_dataset(args.new_store), load_dataset(args.h100)
dev2 = DeviceInfo.lookup(old.context["device_name"])
old_keys = {g.problem.key for g in old.groups}
new = Dataset([g for g in new_all.groups if g.problem.key not in old_keys], dict(new_all.context), "new", [])
# Each H100 problem marked with its GPU (features with the H100's facts), as `train --pool-store` does.
h100.groups = pool(Dataset([], dict(old.context), old.source), [h100]).groups
scored = new.ranked(cvmod.MIN_RANKED_CHOICES)
print(f"old {len(old.groups)} problems, new {len(new.groups)} ({len(scored.groups)} scored), "
      f"H100 {len(h100.groups)}; new shapes also in the H100 store: {len(new.shapes & h100.shapes)}", flush=True)


def fit(groups):
    m, _ = training.fit(Dataset(groups, dict(old.context), "pooled", []), kind="lgbm_rank", device=dev2)
    return m


def row(name, per, t0):
    s = cvmod.summarize(per)
    r = {"model": name, "scored": s["shapes"], "top1_within_10pct": s["top1_within_10pct"],
         "top1_regret_geomean": s["top1_regret_geomean"], "top5_regret_geomean": s["top5_regret_geomean"],
         "top5_within_10pct": s.get("top5_within_10pct"), "spearman_mean": s["spearman_mean"],
         "s": round(time.perf_counter() - t0, 1)}
    print(f"{name:16s} top1<=10% {100 * r['top1_within_10pct']:5.1f}  top1 regret {100 * r['top1_regret_geomean']:5.2f}  "
          f"top5 regret {100 * r['top5_regret_geomean']:5.2f}  spearman {r['spearman_mean']:.3f}  ({r['s']} s)", flush=True)
    return r, per


results, per_problem = [], {}
t = time.perf_counter()
r, p = row("shipped", cvmod.score(LearnedModel.load(args.shipped), scored), t)
results.append(r)
per_problem["shipped"] = p
t = time.perf_counter()
r, p = row("base", cvmod.score(fit(old.groups), scored), t)
results.append(r)
per_problem["base"] = p
t = time.perf_counter()
r, p = row("pooled-a", cvmod.score(fit(old.groups + h100.groups), scored), t)
results.append(r)
per_problem["pooled-a"] = p
t = time.perf_counter()
r, p = row("pooled-b", cvmod.score(fit(old.groups + [g for g in h100.groups if g.shape not in new.shapes]), scored), t)
results.append(r)
per_problem["pooled-b"] = p
folds = cvmod.folds_by_group(new.shapes, cvmod.shape_groups(), args.folds, 0)
for name, pooled in (("fresh", False), ("fresh+pooled-b", True)):
    t, per = time.perf_counter(), []
    for fold in folds:
        extra = [g for g in h100.groups if g.shape not in fold] if pooled else []
        m = fit(old.groups + new.subset(new.shapes - fold).groups + extra)
        per += cvmod.score(m, scored.subset(fold))
    r, p = row(name, per, t)
    results.append(r)
    per_problem[name] = p
if args.out:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "transfer.json"), "w") as f:
        json.dump({"results": results, "per_problem": {k: [{x: m[x] for x in ("key", "top1_regret", "top5_regret",
                   "best_family", "top1_family")} for m in v] for k, v in per_problem.items()}}, f, indent=1)
