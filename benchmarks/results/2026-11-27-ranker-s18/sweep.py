import os, sys, json, time, math, argparse
import numpy as np
from collections import defaultdict
from gemmtune.model import data as D, cv as CV, regressors as R, training as T
from gemmtune.model.metrics import summarize

def run(store, params=None, say=False, per_out=None):
    data = D.load_dataset(store)
    params = params or {}
    orig = R._LGBMRanker.__init__
    def init(self, *a, **k):
        k = {**k, **{kk: v for kk, v in params.items()}}
        orig(self, *a, **k)
    R._LGBMRanker.__init__ = init
    dev = T._device_for(data, None)
    from gemmtune.model import learned as L
    tr_over = params.pop("_trust", None)
    feat = params.pop("_feat", None)
    gb = params.pop("_gain_base", None)
    if gb:
        op = R._LGBMRanker._params
        def _params(self):
            d = op(self); d["label_gain"] = [float(gb ** i - 1) for i in range(self.label_levels + 1)]; return d
        R._LGBMRanker._params = _params
    drop = params.pop("_drop", None)
    if drop:
        from gemmtune.model import features as FF, learned as LL
        of = FF.featurize
        idx = [FF.FEATURE_NAMES.index(n) for n in drop]
        def f2(*a, **k):
            X = of(*a, **k); X = X.copy()
            for i in idx:
                if FF.FEATURE_NAMES[i] == "log2_analytic_us":
                    raise ValueError("base col")
                X[:, i] = 0.0
            return X
        T.featurize = f2; LL.featurize = f2
    if feat:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); import feat as FT; FT.install(feat)
    if tr_over is not None:
        lo, hi = tr_over
        D.TRUST_RADIUS, D.ZERO_RADIUS = lo, hi
        import gemmtune.model.training as TT
        orig_dom = D.domain_of
        def dom(d):
            x = orig_dom(d); x["trust_radius"] = lo; x["zero_radius"] = hi; return x
        TT.domain_of = dom
    groups = CV.shape_groups()
    per = []
    t0 = time.time()
    for i, fold in enumerate(CV.folds_by_group(data.shapes, groups, 5, 0)):
        tr = data.subset(data.shapes - fold); te = data.subset(fold).ranked()
        model, _ = T.fit(tr, kind="lgbm_rank", seed=params.get("seed", 0), device=dev)
        ps = CV.score(model, te)
        for g, m in zip(te.groups, ps):
            m["trust"] = model.trust(g.problem)[0]
            m["group"] = groups.get(g.shape, "?")
            m["dtype"] = g.problem.dtype
            m["nchoices"] = len(g.choices)
            m["near10"] = int((g.times_ms <= g.times_ms.min() * 1.1).sum())
            m["fold"] = i
        per += ps
    R._LGBMRanker.__init__ = orig
    s = summarize(per)
    out = {k: s[k] for k in ("top1_within_10pct", "top1_regret_geomean", "top5_regret_geomean", "spearman_mean", "shapes")}
    out["wall"] = time.time() - t0
    if per_out:
        import pickle; pickle.dump(per, open(per_out, "wb"))
    return out, per

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", default="data/collect/h100/collect.sqlite.gz")
    ap.add_argument("--params", default="{}")
    ap.add_argument("--name", default="x")
    ap.add_argument("--per")
    a = ap.parse_args()
    out, per = run(a.store, json.loads(a.params), per_out=a.per)
    out["name"] = a.name; out["store"] = a.store; out["params"] = a.params
    print(json.dumps(out))
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.jsonl"), "a") as f: f.write(json.dumps(out) + "\n")
