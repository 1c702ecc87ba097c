"""Replay: does --fast gain by always timing the skinny family's first choice on decode-sized
problems (M <= 16), where the model's two best families leave it out? 5-fold cross-validation by
shape on a results store (the folds and model of ``gemmtune train --policies``), CPU only:

    python scripts/exp_fast_decode_family.py data/collect/h100/collect.sqlite.gz rows.json

fast+next: what --fast benchmarks (session 15); +skinny16 / +skinny32: plus skinny's best-ranked
choice when M <= 16 / 32 and no skinny choice is picked already."""
import json
import sys

from fast_replay import print_policies, replay
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


print_policies([("all", rows), ("M<=16", [r for r in rows if r["m"] <= 16]),
                ("17<=M<=32", [r for r in rows if 16 < r["m"] <= 32]),
                ("M<=16 untrusted", [r for r in rows if r["m"] <= 16 and r["trust"] < 0.5])], share=">=97%")
