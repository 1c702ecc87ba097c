"""Pooling both Hopper GPUs' stores when training the lgbm_rank ranker, measured with the repo's
5-fold CV by shape on the target GPU's store (the folds, seed, scoring and min_choices of
gemmtune.model.cv.cross_validate: `gemmtune train --cv 5 --kind lgbm_rank --exclude-suite none`).

For target GPU T, each fold's training set is T's other folds plus, by variant:

* ``base``: nothing (must reproduce cross_validate: H100 85.8%, H200 87.0% top-1 within 10%);
* ``a``: every problem of the other GPU's store;
* ``b``: the other GPU's problems except those whose (M, N, K) is in T's held-out fold (no
  identical shape measured on the other GPU reaches training: the honest variant);
* ``c``: as ``b``, plus one feature column, log2 of the row's GPU's HBM bandwidth (GB/s).

Every problem is featurized with its OWN GPU's DeviceInfo (the analytic model's estimate and
its parts are features); the held-out T problems are scored by the model built for T
(``LearnedModel.rank_keys``, through ``cv.score``), exactly as cross_validate does.

    PYTHONPATH=src python benchmarks/results/2026-11-26-pooled-ranker/pooled.py --gpu h100 --variant b \
        [--seed 0] [--threads 2] [--out results.jsonl]

``--seed``: the ranker's seed (LightGBM bagging / feature sampling); the folds always use seed 0.
"""
import argparse
import json
import math
import os
import pickle
import time

import numpy as np

from gemmtune.device import DeviceInfo
from gemmtune.model import cv as cvmod
from gemmtune.model import learned, regressors, training
from gemmtune.model.analytic import AnalyticModel
from gemmtune.model.data import Dataset, load_dataset
from gemmtune.model.features import featurize

STORES = {"h100": "data/collect/h100/collect.sqlite.gz", "h200": "data/collect/collect.sqlite.gz"}
OTHER = {"h100": "h200", "h200": "h100"}
HERE = os.path.dirname(os.path.abspath(__file__))

ap = argparse.ArgumentParser()
ap.add_argument("--gpu", required=True, choices=sorted(STORES))
ap.add_argument("--variant", required=True, choices=["base", "a", "b", "c"])
ap.add_argument("--seed", type=int, default=0, help="the ranker's seed (folds: seed 0)")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--folds", type=int, default=5)
ap.add_argument("--min-choices", type=int, default=cvmod.MIN_RANKED_CHOICES)
ap.add_argument("--out", default=os.path.join(HERE, "results.jsonl"))
args = ap.parse_args()


def load(gpu: str) -> Dataset:
    os.makedirs("/tmp/pooled", exist_ok=True)
    cache = f"/tmp/pooled/{gpu}.pkl"
    if os.path.exists(cache):
        with open(cache, "rb") as f:
            return pickle.load(f)
    d = load_dataset(STORES[gpu])
    with open(cache, "wb") as f:
        pickle.dump(d, f)
    return d


target, other = load(args.gpu), load(OTHER[args.gpu])
dev_t = DeviceInfo.lookup(target.context["device_name"])
dev_o = DeviceInfo.lookup(other.context["device_name"])
assert dev_t != dev_o, (dev_t, dev_o)
# Each group remembers the GPU that measured it: the patched _matrix featurizes it with that one.
for g in target.groups:
    g.device = dev_t
for g in other.groups:
    g.device = dev_o

EXTRA_BW = args.variant == "c"
_analytic: dict = {}


def _featurize(problem, choices, device, *, analytic=None, choice_batch=None):
    X = featurize(problem, choices, device, analytic=analytic, choice_batch=choice_batch)
    if not EXTRA_BW:
        return X
    return np.concatenate([X, np.full((len(X), 1), math.log2(device.mem_bw_gbps))], axis=1)


def _matrix(data: Dataset, device: DeviceInfo, analytic: AnalyticModel):
    """training._matrix, each group featurized with its own GPU (``g.device``)."""
    Xs, ys, gid = [], [], []
    for i, g in enumerate(data.groups):
        d = getattr(g, "device", None) or device
        am = analytic if d == device else _analytic.setdefault(d, AnalyticModel(d))
        Xs.append(_featurize(g.problem, g.choices, d, analytic=am))
        ys.append(np.log(g.times_ms))
        gid.append(np.full(len(g.choices), i))
    return np.concatenate(Xs), np.concatenate(ys), np.concatenate(gid)


class Ranker(regressors._LGBMRanker):
    def __init__(self, seed=0, **kw):
        super().__init__(**{**kw, "seed": args.seed, "threads": args.threads})


training._matrix = _matrix
training.RANKERS["lgbm_rank"] = Ranker
if EXTRA_BW:
    learned.featurize = _featurize  # rank_keys featurizes the held-out problems with the model's device

t0 = time.perf_counter()
groups = cvmod.shape_groups()
folds = cvmod.folds_by_group(target.shapes, groups, args.folds, 0)
per: list = []
extra_counts = []
fit_s = 0.0
for i, fold in enumerate(folds):
    train_d = target.subset(target.shapes - fold)
    if args.variant == "base":
        extra = []
    elif args.variant == "a":
        extra = list(other.groups)
    else:
        extra = [g for g in other.groups if g.shape not in fold]
    extra_counts.append(len(extra))
    pooled = Dataset(train_d.groups + extra, dict(train_d.context), train_d.source, list(train_d.notes))
    test_d = target.subset(fold).ranked(args.min_choices)
    t1 = time.perf_counter()
    model, _ = training.fit(pooled, kind="lgbm_rank", seed=args.seed, device=dev_t)
    fit_s += time.perf_counter() - t1
    assert model.device == dev_t
    per += cvmod.score(model, test_d)
    print(f"fold {i + 1}/{args.folds}: trained on {len(train_d.groups)} + {len(extra)} problems, "
          f"scored {len(test_d.groups)}", flush=True)

s = cvmod.summarize(per)
overlap = len(target.shapes & other.shapes)
row = {"gpu": args.gpu, "variant": args.variant, "seed": args.seed, "threads": args.threads,
       "top1_within_10pct": s["top1_within_10pct"], "top1_regret_geomean": s["top1_regret_geomean"],
       "top5_regret_geomean": s["top5_regret_geomean"], "spearman_mean": s["spearman_mean"],
       "top1_found": s["top1_found"], "tuner_top1_within_10pct": s.get("tuner_top1_within_10pct"),
       "scored": s["shapes"], "target_problems": len(target.groups), "target_shapes": len(target.shapes),
       "other_problems": len(other.groups), "shared_shapes": overlap, "extra_problems_per_fold": extra_counts,
       "fit_s": round(fit_s, 1), "wall_s": round(time.perf_counter() - t0, 1),
       "lightgbm": regressors.import_lightgbm().__version__, "numpy": np.__version__}
with open(args.out, "a") as f:
    f.write(json.dumps(row) + "\n")
print(f"{args.gpu} {args.variant} seed {args.seed}: top1<=10% {100 * row['top1_within_10pct']:.1f}  "
      f"top1 regret {100 * row['top1_regret_geomean']:.2f}  top5 regret {100 * row['top5_regret_geomean']:.2f}  "
      f"spearman {row['spearman_mean']:.3f}  scored {row['scored']}  ({row['wall_s']} s)", flush=True)
