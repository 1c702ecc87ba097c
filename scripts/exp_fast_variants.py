"""Replay variants of --fast's selection on a results store, 5-fold cross-validation by shape
(the folds and model of ``gemmtune train --policies``), CPU only:

    python scripts/exp_fast_variants.py data/collect/h100/collect.sqlite.gz rows.json

fast: the first of the model's 2 best families (session 14); fast3: of its 3 best; fast_u3 /
fast_u3b: 3 families where trust < 0.5 / < 0.99; fast+next: fast plus the model's next best
choice (what --fast benchmarks since session 15); fast+next2: two more; fam2x2: the first two
of each of the 2 best families; fast+next10 / fast+next3: the next one only when the model puts
it within 10% / 3% of its first. Output: benchmarks/results/2026-11-26-h100-s15-fast-next/variants.txt."""
import sys
import json
import math
from gemmtune.model.topk import fast_pick, diversity_family, with_other_path
from fast_replay import print_policies, replay


def policies(others, keys, order, trust, problem):
    fams = [diversity_family(c) for c in others]
    pol = {}
    pol["fast"] = fast_pick(others, keys, extra=0)
    pol["fast3"] = fast_pick(others, keys, 3, extra=0)
    pol["fast_u3"] = fast_pick(others, keys, 3 if trust < 0.5 else 2, extra=0)
    pol["fast_u3b"] = fast_pick(others, keys, 3 if trust < 0.99 else 2, extra=0)
    # fast + model's 2nd choice overall
    p = fast_pick(others, keys, extra=0)
    extra = next((int(j) for j in order if int(j) not in p), None)
    pol["fast+next"] = p + ([extra] if extra is not None else [])
    p2 = p + ([extra] if extra is not None else [])
    extra2 = next((int(j) for j in order if int(j) not in p2), None)
    pol["fast+next2"] = p2 + ([extra2] if extra2 is not None else [])
    top2f = []
    for fam in [fams[j] for j in p[:2]]:
        top2f += [int(j) for j in order if fams[j] == fam][:2]
    pol["fam2x2"] = with_other_path(others, order, top2f)
    k0 = keys[order[0]]
    close = extra is not None and keys[extra] <= k0 + math.log(1.10)
    pol["fast+next10"] = p + ([extra] if close else [])
    close = extra is not None and keys[extra] <= k0 + math.log(1.03)
    pol["fast+next3"] = p + ([extra] if close else [])
    return pol


rows = replay(sys.argv[1], policies)
json.dump(rows, open(sys.argv[2], "w"))
subsets = [("all", rows), ("untrusted", [r for r in rows if r["trust"] < 0.5]),
           ("trusted", [r for r in rows if r["trust"] >= 0.5])]
print_policies(subsets + [(f"group:{gname}", [r for r in rows if r["group"] == gname])
                          for gname in sorted({r["group"] for r in rows})])
