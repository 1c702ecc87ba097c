import sys, pickle, math
import numpy as np
from collections import Counter
d = pickle.load(open(sys.argv[1], "rb"))
res = d["res"]
byg = Counter(); missg = Counter(); pairs = Counter(); near = []
for r in res:
    t = r["t"]; k = np.log(r["pred"]); o = np.argsort(np.where(np.isfinite(k), k, np.inf), kind="stable")
    hit = t[o[0]] <= 1.1 * t.min()
    g = r["group"]; byg[g] += 1
    if not hit:
        missg[g] += 1
        bf = r["fams"][int(np.argmin(t))]; tf = r["fams"][o[0]]
        pairs[(bf, tf)] += 1
        # rank of best in model order; rank of first within-10% choice
        ok = np.flatnonzero(t[o] <= 1.1 * t.min())
        near.append((ok[0], t[o[0]] / t.min(), k[o[ok[0]]] - k[o[0]]))
for g in byg: print(g, byg[g], f"hit {1 - missg[g]/byg[g]:.3f}", missg[g])
print(pairs.most_common(20))
near = np.array(near)
print("rank of first ok in model order: ", Counter(near[:, 0].astype(int)).most_common(10))
print("regret of miss quantiles", np.quantile(near[:, 1], [0.25, 0.5, 0.75, 0.9]))
print("key gap to first ok quantiles", np.quantile(near[:, 2], [0.25, 0.5, 0.75, 0.9]))
# tuner view: cuBLAS ('aten' family exactly, not pad+) always timed, plus the model's first other choice
h = []; h2 = []
for r in res:
    t = r["t"]; k = np.log(r["pred"]); fams = np.array(r["fams"]); ids = np.array(r["ids"])
    base = np.array([i == "aten:" or i.startswith("aten:") and "pad" not in i for i in ids])
    rest = np.flatnonzero(~base)
    ro = rest[np.argsort(k[rest], kind="stable")]
    tb = t[base].min() if base.any() else np.inf
    h.append(min(tb, t[ro[0]]) <= 1.1 * t.min())
    h2.append(min(tb, t[ro[:2]].min()) <= 1.1 * t.min())
print("tuner top1 (aten + first other)", np.mean(h), "aten + first two", np.mean(h2))
print(Counter(i for r in res for i in r["ids"] if i.startswith("aten")).most_common(5))
