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
import time

import numpy as np

from gemmtune.model import cv as cvmod
from gemmtune.model import learned, regressors, training
from gemmtune.device import DeviceInfo
from gemmtune.model.choices import ATEN, ChoiceBatch, batch
from gemmtune.model.data import load_dataset
from gemmtune.problem import Problem, element_size

# The candidate version-3 columns (not shipped: see README.md), computed from each choice's
# ChoiceBatch row (its family's launch plan) and appended after version 2's 49 columns.
V3_FEATURES = ("log2_sm_waves", "last_wave_fill", "waste_m", "waste_n", "waste_k", "log2_m_over_block",
               "log2_n_over_block", "log2_program_bytes", "log2_traffic_ratio", "smem_stage_kb", "smem_budget",
               "pipeline_fill", "aspect_mismatch")


def _geometry(problem: Problem, b: ChoiceBatch, device: DeviceInfo) -> list[np.ndarray]:
    """The version-3 columns, from each choice's launch plan (its ChoiceBatch row: the tile, the
    K split and the problem it runs) and the device: why one tile beats another.

    * ``log2_sm_waves``: log2 of programs per SM (occupancy aside); ``last_wave_fill``: the share
      of the SMs the last round of programs keeps busy (1.0: the programs fill every round);
    * ``waste_m`` / ``waste_n`` / ``waste_k``: the share of the edge tiles' work (M, N) and of
      the last K step that is padding (0.0: the block divides the extent);
    * ``log2_m_over_block`` / ``log2_n_over_block``: log2 of the extent per block (negative: the
      block is larger than the problem);
    * ``log2_program_bytes``: operand bytes one program streams; ``log2_traffic_ratio``: log2 of
      the operand bytes all programs stream over the operands' size (tile re-reads, before L2);
    * ``smem_stage_kb``: shared memory one pipeline stage takes; ``smem_budget``: all stages'
      share of the per-program maximum; ``pipeline_fill``: K steps per stage, capped at 1
      (below 1 the pipeline never fills);
    * ``aspect_mismatch``: |log2(block_m / block_n) - log2(M / N)|.

    cuBLAS (aten) rows hold 0 (1 for the fills): its tiles are not ours to see."""
    f = np.float64
    es = float(element_size(problem.dtype))
    sm = float(max(device.sm_count, 1))
    aten = b.fam == ATEN
    M, N = np.maximum(b.m, 1).astype(f), np.maximum(b.n, 1).astype(f)
    k_len = np.maximum(b.k_len, 1).astype(f)
    bm, bn, bk = (np.maximum(x, 16).astype(f) for x in (b.block_m, b.block_n, b.block_k))
    stages = np.maximum(b.stages, 1).astype(f)
    nb = float(problem.batch)
    grid_m, grid_n = np.ceil(M / bm), np.ceil(N / bn)
    programs = grid_m * grid_n * nb * np.maximum(b.split, 1)
    rounds = np.ceil(programs / sm)
    k_steps = np.ceil(k_len / bk)
    prog_bytes = (bm + bn) * k_len * es
    operand_bytes = (M * np.maximum(b.k, 1) + np.maximum(b.k, 1) * N) * es * nb
    step_bytes = (bm * bk + bk * bn) * es
    cols = [
        np.log2(programs / sm), (programs - (rounds - 1) * sm) / sm,
        1.0 - M / (grid_m * bm), 1.0 - N / (grid_n * bn), 1.0 - k_len / (k_steps * bk),
        np.log2(M / bm), np.log2(N / bn),
        np.log2(prog_bytes), np.log2(programs * prog_bytes / operand_bytes),
        step_bytes / 1024.0, stages * step_bytes / max(device.smem_per_block, 1),
        np.minimum(1.0, k_steps / stages), np.abs(np.log2(bm / bn) - np.log2(M / N)),
    ]
    fills = {1, 11}  # last_wave_fill, pipeline_fill: 1.0 on aten rows
    return [np.where(aten, 1.0 if i in fills else 0.0, c) for i, c in enumerate(cols)]


STORES = {"h100": "data/collect/h100/collect.sqlite.gz", "h200": "data/collect/collect.sqlite.gz"}

ap = argparse.ArgumentParser()
ap.add_argument("--gpu", required=True, choices=sorted(STORES))
ap.add_argument("--name", required=True)
ap.add_argument("--params", default="{}", help="JSON: _LGBMRanker keyword overrides")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--features", default="v2", choices=["v2", "v3"],
                help="v2: feature version 2 (shipped); v3: plus V3_FEATURES")
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


ENSEMBLE = int(params.pop("ensemble", 1))  # > 1: the mean score of that many rankers, seeds seed..seed+n-1


class Ranker(regressors._LGBMRanker):
    def __init__(self, seed=0, **kw):
        super().__init__(**{"seed": seed, **kw, **params, "threads": args.threads})

    def fit(self, X, y, gid):
        if ENSEMBLE <= 1:
            return super().fit(X, y, gid)
        self.members = []
        for i in range(ENSEMBLE):
            m = regressors._LGBMRanker(**{"seed": self.seed + i, **params, "threads": args.threads})
            self.booster = m.fit(X, y, gid).booster
            self.members.append(self.booster)
        self.scale = self._calibrate(self.predict(X), y, gid)
        return self

    def predict(self, X):
        if ENSEMBLE <= 1:
            return super().predict(X)
        X = np.asarray(X, dtype=np.float64)
        return np.mean([b.predict(X, num_threads=self.threads) for b in self.members], axis=0)


training.RANKERS["lgbm_rank"] = Ranker
if args.features == "v3":
    from gemmtune.model.features import featurize

    def featurize_v3(problem, choices, device, *, analytic=None, choice_batch=None):
        b = choice_batch if choice_batch is not None else batch(problem, choices)
        X = featurize(problem, None, device, analytic=analytic, choice_batch=b)
        return np.concatenate([X, np.stack(_geometry(problem, b, device), axis=1)], axis=1)

    training.featurize = learned.featurize = featurize_v3
t0 = time.perf_counter()
res = cvmod.cross_validate(data, kinds=["lgbm_rank"], folds=5, seed=args.seed, groups=cvmod.shape_groups(),
                           device=args.gpu)
s = res["summaries"]["lgbm_rank"]
if ENSEMBLE > 1:
    params["ensemble"] = ENSEMBLE
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
