"""Does call 5's data (30 more H200 problems of the same classes) improve the H200 ranker? (session 21)

Scores, on the 30 problems call 5 added (outside the shipped ranker's training): the shipped ranker
(trained on call 1's store pooled with the H100 store), and the same pooled training on call 5's
store cross-validated by shape (5 folds, the CV of ``gemmtune train --cv 5 --pool-store``), whose
held-out scores are also summarized over every H200 problem.

    mkdir -p /tmp/h200-call1 && for f in json lgbm.txt; do   # the ranker shipped from call 1's store
      git show f8c9734:src/gemmtune/data/models/nvidia-h200-rank.$f > /tmp/h200-call1/nvidia-h200-rank.$f; done
    PYTHONPATH=src python scripts/exp_h200_more.py CALL1_STORE CALL5_STORE \
      --shipped /tmp/h200-call1/nvidia-h200-rank.json [--out JSON]
"""
import argparse
import json

from gemmtune.model import cv as cvmod
from gemmtune.model.data import exclude, load_dataset, pool, public_shapes
from gemmtune.model.learned import LearnedModel
from gemmtune.model.training import fit

ap = argparse.ArgumentParser()
ap.add_argument("call1")
ap.add_argument("call5")
ap.add_argument("--h100", default="data/collect/h100/collect.sqlite.gz")
ap.add_argument("--shipped", required=True, help="the ranker trained on call 1's store (see above)")
ap.add_argument("--out")
args = ap.parse_args()
before = {g.problem.key for g in load_dataset(args.call1).groups}
data, _ = exclude(pool(load_dataset(args.call5), [load_dataset(args.h100)]), public_shapes())
added = [g.problem.key for g in data.native().ranked().groups if g.problem.key not in before]
print(f"{len(data.native().groups)} H200 problems, {len(added)} added by call 5 (ranked)", flush=True)


def line(name, per):
    s = cvmod.summarize(per)
    print(f"{name:34s} n={s['shapes']:4d} top1<=10% {100 * s['top1_within_10pct']:5.1f}  "
          f"top1 regret {100 * s['top1_regret_geomean']:5.2f}  top5 regret {100 * s['top5_regret_geomean']:5.2f}", flush=True)
    return {"model": name, **s}


rows = []
new_d = data.native().ranked()
new_d.groups = [g for g in new_d.groups if g.problem.key in set(added)]
rows.append(line("shipped (call 1 + H100)", cvmod.score(LearnedModel.load(args.shipped), new_d)))
per = []
for fold in cvmod.folds_by_group(data.shapes, cvmod.shape_groups(), 5, 0):
    m, _ = fit(data.subset(data.shapes - fold), kind="lgbm_rank", device="h200")
    per += cvmod.score(m, data.subset(fold).native().ranked())
rows.append(line("call 5 + H100, CV: added problems", [p for p in per if p["key"] in set(added)]))
rows.append(line("call 5 + H100, CV: every problem", per))
if args.out:
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
