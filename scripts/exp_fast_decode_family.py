"""Replay: does --fast gain by always timing the skinny family's first choice on decode-sized
problems (M <= 16), where the model's two best families leave it out? 5-fold cross-validation by
shape on a results store (the folds and model of ``gemmtune train --policies``), CPU only:

    python scripts/exp_fast_decode_family.py data/collect/h100/collect.sqlite.gz rows.json

fast+next: what --fast benchmarks (session 15); +skinny16 / +skinny32: plus skinny's best-ranked
choice when M <= 16 / 32 and no skinny choice is picked already."""
import json
import sys
import time

import numpy as np

from gemmtune.model import cv as cvmod
from gemmtune.model.data import load_dataset
from gemmtune.model.topk import family_of, fast_pick, rank_keys, twin_indices

data = load_dataset(sys.argv[1])
groups = cvmod.shape_groups()
dev = cvmod._device_for(data, "h100")
rows, t0 = [], time.time()
for i, fold in enumerate(cvmod.folds_by_group(data.shapes, groups, 5, 0)):
    model, _ = cvmod.fit(data.subset(data.shapes - fold), kind="lgbm_rank", seed=0, device=dev)
    for g in data.subset(fold).ranked(cvmod.MIN_RANKED_CHOICES).groups:
        base = np.array([c.family == "aten" and not c.pad for c in g.choices])
        rest = np.flatnonzero(~base)
        if not len(rest):
            continue
        others = [g.choices[j] for j in rest]
        keys = rank_keys(model, g.problem, others)
        best = g.times_ms.min()
        floor = g.times_ms[base].min() if base.any() else np.inf

        def frac(idx):
            idx = rest[np.asarray(idx, dtype=int)] if len(idx) else np.array([], dtype=int)
            return float(best / min(floor, g.times_ms[idx].min() if len(idx) else np.inf)), int(base.sum()) + len(idx)
        order = np.argsort(np.where(np.isfinite(keys), keys, np.inf), kind="stable")
        p = fast_pick(others, keys)
        pol = {"fast+next": frac(twin_indices(others, p))}
        for cap in (16, 32):
            q = list(p)
            if g.problem.m <= cap and not any(family_of(others[j]) == "skinny" for j in q):
                sk = next((int(j) for j in order if family_of(others[j]) == "skinny"), None)
                if sk is not None:
                    q.append(sk)
            pol[f"+skinny{cap}"] = frac(twin_indices(others, q))
        rows.append({"key": g.problem.key, "m": g.problem.m, "group": groups.get(g.shape, "?"),
                     "trust": float(model.trust(g.problem)[0]), "pol": pol})
    print("fold", i, round(time.time() - t0), flush=True)
json.dump(rows, open(sys.argv[2], "w"))


def summ(rs, name):
    f = np.array([r["pol"][name][0] for r in rs])
    n = np.array([r["pol"][name][1] for r in rs])
    return f"{np.exp(np.log(f).mean()) * 100:6.2f}% min {f.min() * 100:5.1f} >=97% {(f >= 0.97).mean() * 100:5.1f}% cand {n.mean():.2f}"


for sub, rs in [("all", rows), ("M<=16", [r for r in rows if r["m"] <= 16]),
                ("17<=M<=32", [r for r in rows if 16 < r["m"] <= 32]),
                ("M<=16 untrusted", [r for r in rows if r["m"] <= 16 and r["trust"] < 0.5])]:
    if rs:
        print(f"== {sub} ({len(rs)})")
        for name in rows[0]["pol"]:
            print(f"  {name:10s} {summ(rs, name)}")
