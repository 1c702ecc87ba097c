"""The old and the new H100 store, each cross-validated as `gemmtune train --cv 5 --kind lgbm_rank`
does (5 folds by shape, dealt per collection-plan group, seed 0), scored per problem, then
compared on the problems both stores hold. CPU only.

    PYTHONPATH=src python benchmarks/results/2026-11-26-h100-ranker-pad/shared.py OLD.sqlite.gz NEW.sqlite.gz
"""
import sys

import numpy as np

from gemmtune.model import cv
from gemmtune.model.data import load_dataset
from gemmtune.model.metrics import summarize
from gemmtune.model.training import fit


def per_problem(path: str) -> dict:
    data = load_dataset(path)
    out = {}
    for fold in cv.folds_by_group(data.shapes, cv.shape_groups(), 5, 0):
        model, _ = fit(data.subset(data.shapes - fold), kind="lgbm_rank", seed=0, device="h100")
        for m in cv.score(model, data.subset(fold).ranked(cv.MIN_RANKED_CHOICES)):
            out[m["key"]] = m
    return out


old, new = per_problem(sys.argv[1]), per_problem(sys.argv[2])
shared = sorted(old.keys() & new.keys())
only_new = sorted(new.keys() - old.keys())
for name, per, keys in (("old store, shared problems", old, shared), ("new store, shared problems", new, shared),
                        ("new store, its new problems", new, only_new), ("new store, all", new, sorted(new))):
    s = summarize([per[k] for k in keys])
    print(f"{name:30s} n={len(keys):4d}  top-1 within 10% {100 * s['top1_within_10pct']:.1f}%  "
          f"top-1 regret (geomean) {100 * s['top1_regret_geomean']:.1f}%  "
          f"top-5 regret (geomean) {100 * s['top5_regret_geomean']:.2f}%  Spearman {s['spearman_mean']:.3f}")
unal = [k for k in shared if ".u" in k]
for name, per in (("old", old), ("new", new)):
    s = summarize([per[k] for k in unal])
    print(f"{name} store, shared unaligned problems n={len(unal)}: top-1 within 10% {100 * s['top1_within_10pct']:.1f}%")
print("same best choice count on shared problems:",
      int(np.sum([old[k].get("best_family") == new[k].get("best_family") for k in shared])))

# The replaced model (trained on every old problem) on the new problems, which it never saw,
# with their new candidate sets: like for like with the new store's cross-validation on them.
if len(sys.argv) > 3:
    from gemmtune.model import load_model
    from gemmtune.device import DeviceInfo
    data = load_dataset(sys.argv[2])
    oldm = load_model(sys.argv[3], DeviceInfo.lookup("h100"), triton_version="3.6.0")
    sub = data.subset({g.shape for g in data.groups if g.problem.key in set(only_new)}).ranked(cv.MIN_RANKED_CHOICES)
    s = summarize(cv.score(oldm, sub))
    print(f"replaced model on the {len(sub.groups)} new problems: top-1 within 10% {100 * s['top1_within_10pct']:.1f}%  "
          f"top-1 regret (geomean) {100 * s['top1_regret_geomean']:.1f}%  top-5 regret {100 * s['top5_regret_geomean']:.2f}%")
