import sys, pickle, math
import numpy as np
from collections import defaultdict
d = pickle.load(open(sys.argv[1], "rb"))
res, train, folds = d["res"], d["train"], d["folds"]
shape_fold = {}
for i, f in enumerate(folds):
    for s in f: shape_fold[tuple(s)] = i
def cls(p):
    dt = "f16" if p.dtype in ("bfloat16", "float16") else p.dtype
    return (p.op, dt, p.layout_a, p.layout_b, p.aligned_a, p.aligned_b, p.out_dtype or p.dtype, p.allow_tf32)
def vec(p): return np.array([math.log2(p.m), math.log2(p.n), math.log2(p.k)])
# per training problem: dict id -> rel ln time
T = []
for t in train:
    p = t["problem"]; best = t["t"].min()
    T.append(dict(fold=shape_fold.get(t["shape"], -1), native=t["native"], cls=cls(p), v=vec(p),
                  rel={i: math.log(x / best) for i, x in zip(t["ids"], t["t"])}, dt=p.dtype))
def knn_scores(r, K, tau, strict):
    p = r["problem"]; c = cls(p); v = vec(p)
    cand = [t for t in T if t["fold"] != r["fold"] and (t["cls"] == c if strict else t["cls"][0:2] == c[0:2])]
    if not cand: return None
    dist = np.array([np.linalg.norm(t["v"] - v) + (0 if t["cls"] == c else 1.0) for t in cand])
    o = np.argsort(dist)[:K]
    num = defaultdict(float); den = defaultdict(float)
    for j in o:
        w = math.exp(-dist[j] / tau)
        for i, x in cand[j]["rel"].items():
            num[i] += w * min(x, 1.5); den[i] += w
    return np.array([num[i] / den[i] if den[i] > 0 else np.nan for i in r["ids"]])
def metric(keys_list):
    hits = []; reg = []
    for r, k in zip(res, keys_list):
        t = r["t"]; o = np.argsort(np.where(np.isfinite(k), k, np.inf), kind="stable")
        reg.append(t[o[0]] / t.min()); hits.append(t[o[0]] <= 1.1 * t.min())
    return np.mean(hits), math.exp(np.mean(np.log(reg))) - 1
base = [np.log(r["pred"]) for r in res]
print("lgbm", metric(base))
for K in (3, 5, 10):
    for tau in (0.5, 1.0):
        for strict in (True, False):
            ks = [knn_scores(r, K, tau, strict) for r in res]
            cover = np.mean([np.mean(np.isfinite(k)) if k is not None else 0 for k in ks])
            pure = [np.where(np.isfinite(k), k, 5.0) if k is not None else b for k, b in zip(ks, base)]
            line = [f"K{K} tau{tau} strict{strict} cover {cover:.2f} pure {metric(pure)[0]:.3f}"]
            for a in (0.25, 0.5, 1.0):
                bl = []
                for k, b in zip(ks, base):
                    bb = b - b.min()
                    if k is None: bl.append(bb); continue
                    kk = np.where(np.isfinite(k), k, np.nanmax(np.append(k[np.isfinite(k)], 0.5)))
                    bl.append((1 - a) * bb + a * kk if a < 1 else bb + kk)
                m = metric(bl); line.append(f"a{a}: {m[0]:.3f}/{m[1]:.3f}")
            print(" ".join(line), flush=True)
