"""Replay: does --fast gain by always timing the skinny family's first choice on decode-sized
problems (M <= 16), where the model's two best families leave it out? 5-fold cross-validation by
shape on a results store (the folds and model of ``gemmtune train --policies``), CPU only:

    python scripts/exp_fast_decode_family.py data/collect/h100/collect.sqlite.gz rows.json

fast+next: what --fast benchmarks (session 15); +skinny16 / +skinny32: plus skinny's best-ranked
choice when M <= 16 / 32 and no skinny choice is picked already."""
import json
import sys

import numpy as np

from fast_replay import replay
from gemmtune.model.topk import family_of, fast_pick


def policies(others, keys, order, trust, problem):
    p = fast_pick(others, keys)
    pol = {"fast+next": p}
    for cap in (16, 32):
        q = list(p)
        if problem.m <= cap and not any(family_of(others[j]) == "skinny" for j in q):
            sk = next((int(j) for j in order if family_of(others[j]) == "skinny"), None)
            if sk is not None:
                q.append(sk)
        pol[f"+skinny{cap}"] = q
    return pol


rows = replay(sys.argv[1], policies)
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
