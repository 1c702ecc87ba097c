import pickle, sys, numpy as np
from collections import defaultdict
per = pickle.load(open(sys.argv[1], "rb"))
def tab(keyf, name):
    d = defaultdict(list)
    for m in per: d[keyf(m)].append(m["top1_regret"] <= 0.1 + 1e-12)
    print(f"-- by {name}")
    for k in sorted(d, key=str): print(f"  {k!s:30} n={len(d[k]):4d} hit={np.mean(d[k]):.3f} miss={len(d[k]) - sum(d[k])}")
tab(lambda m: m["group"], "group")
tab(lambda m: m["dtype"], "dtype")
tab(lambda m: ("t=1" if m["trust"] >= 1 else "t=0" if m["trust"] <= 0 else "0<t<1"), "trust")
tab(lambda m: m["best_family"], "best family")
tab(lambda m: m["top1_family"], "top1 family")
tab(lambda m: min(m["near10"], 6), "near10 (#choices within 10% of best)")
tab(lambda m: (m["best_family"] == m["top1_family"]), "top1 fam==best fam")

misses = [m for m in per if m["top1_regret"] > 0.1]
print(len(misses))
for m in sorted(misses, key=lambda m: -m["top1_regret"])[:60]:
    print(f"  {str(m['key'])[:70]:70} {m['group']:8} t={m['trust']:.2f} r1={m['top1_regret']:.3f} r5={m['top5_regret']:.3f} best={m['best_family']} top1={m['top1_family']} near10={m['near10']} n={m['nchoices']}")
