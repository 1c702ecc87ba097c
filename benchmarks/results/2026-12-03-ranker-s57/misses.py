"""Where the held-out top-1 misses are (per_problem.json.gz, written by compare.py): by collection-plan
group, by best vs first-choice family, by how big the miss is, and by how crowded the top is."""
import gzip
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "src"))
from gemmtune.model.cv import shape_groups  # noqa: E402

per = json.loads(gzip.decompress((HERE / "per_problem.json.gz").read_bytes()))
groups = shape_groups()
name = sys.argv[1] if len(sys.argv) > 1 else "h200:lgbm@0"
rows = per[name]


def grp(key):
    m = re.search(r"M(\d+)-N(\d+)-K(\d+)", key)
    return groups.get(tuple(int(x) for x in m.groups()), "?")


hit = lambda r: r["top1_regret"] <= 0.1 + 1e-9  # noqa: E731
miss = [r for r in rows if not hit(r)]
print(f"{name}: {len(rows)} scored, {len(rows) - len(miss)} hits ({(len(rows) - len(miss)) / len(rows):.1%}), {len(miss)} misses")
by = defaultdict(list)
for r in rows:
    by[grp(r["key"])].append(r)
print("\n| group | problems | hit | misses |\n|---|---:|---:|---:|")
for g, rs in sorted(by.items(), key=lambda kv: -len(kv[1])):
    h = sum(hit(r) for r in rs)
    print(f"| {g} | {len(rs)} | {h / len(rs):.1%} | {len(rs) - h} |")
reg = np.array([r["top1_regret"] for r in miss])
print("\nmiss size (first choice / best - 1):", {f"<= {b:.0%}": int((reg <= b).sum()) for b in (0.15, 0.2, 0.3, 0.5, 1.0)},
      f"> 100%: {int((reg > 1).sum())}")
print("misses with the best in the model's top 5:", sum(r["top5_regret"] <= 1e-12 for r in miss),
      "; top-5 within 10%:", sum(r["top5_regret"] <= 0.1 for r in miss))
bm = np.array([r["best_ms"] for r in miss])
ba = np.array([r["best_ms"] for r in rows])
print("best time < 10 us: misses", int((bm < 0.01).sum()), "of", len(miss), "; all problems", int((ba < 0.01).sum()), "of", len(rows),
      f"; hit rate there {1 - (bm < 0.01).sum() / max((ba < 0.01).sum(), 1):.1%},"
      f" elsewhere {1 - (bm >= 0.01).sum() / (ba >= 0.01).sum():.1%}")
nw = np.array([r["n_within_10pct"] for r in rows])
print("choices within 10% of the best, per problem: hits median", np.median([r["n_within_10pct"] for r in rows if hit(r)]),
      "misses median", np.median([r["n_within_10pct"] for r in miss]))
for lo, hi in ((1, 1), (2, 3), (4, 10), (11, 10**9)):
    sel = [r for r in rows if lo <= r["n_within_10pct"] <= hi]
    if sel:
        print(f"  {lo}-{hi if hi < 10**9 else 'inf'} within 10%: {len(sel)} problems, hit {sum(map(hit, sel)) / len(sel):.1%}")
sob = np.array([r["second_over_best"] for r in miss])
print("misses whose best is alone (2nd-best > 1.05x best):", int((sob > 1.05).sum()))
pairs = Counter((r["best_family"], r["top1_family"]) for r in miss)
print("\nmisses by (best family, first-choice family):", pairs.most_common(10))
same = [r for r in rows if r["best_family"] == r["top1_family"]]
print(f"families agree on {len(same)} problems: hit {sum(map(hit, same)) / len(same):.1%}; "
      f"differ on {len(rows) - len(same)}: hit {(sum(map(hit, rows)) - sum(map(hit, same))) / max(len(rows) - len(same), 1):.1%}")
# stable across seeds?
seeds = [k for k in per if k.startswith(name.split("@")[0] + "@")]
if len(seeds) > 1:
    ms = [{r["key"] for r in per[k] if not hit(r)} for k in seeds]
    print(f"\nmisses over seeds {seeds}: in all {len(set.intersection(*ms))}, in any {len(set.union(*ms))}")
