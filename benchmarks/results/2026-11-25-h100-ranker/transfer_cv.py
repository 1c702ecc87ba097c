"""Fold-fair transfer study: on each held-out fold of H100 shapes (the CV's folds), score
(a) lgbm_rank trained on the other H100 folds, (b) lgbm_rank trained on the H200 store less the
fold's shapes (predicting with its own H200 features, as the shipped H200 file would), and
(c) one ranker trained on both (H200 rows featurized with the H200's facts, H100 rows with the
H100's, one ranking group per problem and GPU), predicting with the H100's facts.
Run from the repo root: PYTHONPATH=src python benchmarks/results/2026-11-25-h100-ranker/transfer_cv.py"""
import json

import numpy as np

from gemmtune.device import DeviceInfo
from gemmtune.model import AnalyticModel, load_dataset
from gemmtune.model.cv import folds_by_group, shape_groups
from gemmtune.model.metrics import evaluate, summarize
from gemmtune.model.training import _fit_one, _matrix, fit

H100, H200 = DeviceInfo.lookup("h100"), DeviceInfo.lookup("h200")
h100 = load_dataset("data/collect/h100/collect.sqlite.gz")
h200 = load_dataset("data/collect/collect.sqlite.gz")
per: dict[str, list] = {"h100 only": [], "h200 only": [], "pooled": [], "analytic": []}
for i, fold in enumerate(folds_by_group(h100.shapes, shape_groups(), 5, 0)):
    tr, te = h100.subset(h100.shapes - fold), h100.subset(fold).ranked(20)
    a, _ = fit(tr, kind="lgbm_rank", device=H100)
    b, _ = fit(h200.subset(h200.shapes - fold), kind="lgbm_rank", device=H200)
    X1, y1, g1 = _matrix(tr, H100, AnalyticModel(H100))
    X2, y2, g2 = _matrix(h200.subset(h200.shapes - fold), H200, AnalyticModel(H200))
    reg = _fit_one("lgbm_rank", np.concatenate([X1, X2]), np.concatenate([y1, y2]), 0, None,
                   np.concatenate([g1, g2 + g1.max() + 1]))
    c, _ = fit(tr, kind="lgbm_rank", device=H100)  # H100's provenance and domain, the pooled ranker
    c.regressor = reg
    for name, m in (("h100 only", a), ("h200 only", b), ("pooled", c), ("analytic", AnalyticModel(H100))):
        per[name] += evaluate(m, te)["shapes"]
    print(f"fold {i + 1}/5 done", flush=True)
out = {k: summarize(v) for k, v in per.items()}
for k, s in out.items():
    print(k, json.dumps({x: round(s[x], 4) for x in ("shapes", "spearman_mean", "top1_regret_geomean",
                                                      "top1_within_10pct", "top5_regret_geomean")}))
