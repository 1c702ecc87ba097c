"""Sweep of lgbm_rank settings, each measured with the repo's own 5-fold CV by shape
(gemmtune.model.cv.cross_validate: folds dealt per collection-plan shape group, seed 0, every
shape held out once, problems with >= 20 choices scored), as `gemmtune train --cv 5 --kind
lgbm_rank --exclude-suite none` does. The ranker's settings and (optionally) extra feature
columns are patched in for the run; nothing here reads the public suite.

    PYTHONPATH=src python benchmarks/results/2026-11-25-ranker-v2/sweep.py --gpu h100 --name base \
        [--params '{"num_leaves": 63}'] [--features v2|v3] [--out results.jsonl]
"""
import argparse
import json
import os
import pickle
import sys
import time

import numpy as np

from gemmtune.model import cv as cvmod
from gemmtune.model import learned, regressors, training
from gemmtune.model.data import load_dataset

STORES = {"h100": "data/collect/h100/collect.sqlite.gz", "h200": "data/collect/collect.sqlite.gz"}

ap = argparse.ArgumentParser()
ap.add_argument("--gpu", required=True, choices=sorted(STORES))
ap.add_argument("--name", required=True)
ap.add_argument("--params", default="{}", help="JSON: _LGBMRanker keyword overrides")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--features", default="v2", choices=["v2", "v3"],
                help="v2: the first 49 columns only (feature version 2's); v3: all")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--out", default="benchmarks/results/2026-11-25-ranker-v2/sweep.jsonl")
args = ap.parse_args()
params = json.loads(args.params)

cache = f"/tmp/rv2/{args.gpu}.pkl"
if os.path.exists(cache):
    data = pickle.load(open(cache, "rb"))
else:
    data = load_dataset(STORES[args.gpu])
    pickle.dump(data, open(cache, "wb"))


class Ranker(regressors._LGBMRanker):
    def __init__(self, seed=0, **kw):
        super().__init__(**{"seed": seed, **kw, **params, "threads": args.threads})


training.RANKERS["lgbm_rank"] = Ranker
if args.features == "v2":
    from gemmtune.model.features import V3_FEATURES, featurize

    def featurize_v2(*a, **kw):
        return featurize(*a, **kw)[:, :-len(V3_FEATURES)]

    training.featurize = learned.featurize = featurize_v2
t0 = time.perf_counter()
res = cvmod.cross_validate(data, kinds=["lgbm_rank"], folds=5, seed=args.seed, groups=cvmod.shape_groups(),
                           device=args.gpu)
s = res["summaries"]["lgbm_rank"]
row = {"gpu": args.gpu, "name": args.name, "params": params, "features": args.features, "seed": args.seed,
       "top1_within_10pct": s["top1_within_10pct"], "top1_regret_geomean": s["top1_regret_geomean"],
       "top5_regret_geomean": s["top5_regret_geomean"], "spearman_mean": s["spearman_mean"],
       "top1_found": s["top1_found"], "tuner_top1_within_10pct": s.get("tuner_top1_within_10pct"),
       "scored": res["scored"], "wall_s": round(time.perf_counter() - t0, 1),
       "families_top1_10": {f: round(v.get("top1_within_10pct", float("nan")), 4)
                            for f, v in res["families"]["lgbm_rank"].items()}}
with open(args.out, "a") as f:
    f.write(json.dumps(row) + "\n")
print(f"{args.gpu} {args.name}: top1<=10% {100*row['top1_within_10pct']:.1f}  top1 regret "
      f"{100*row['top1_regret_geomean']:.2f}  top5 regret {100*row['top5_regret_geomean']:.2f}  "
      f"spearman {row['spearman_mean']:.3f}  ({row['wall_s']} s)", flush=True)
