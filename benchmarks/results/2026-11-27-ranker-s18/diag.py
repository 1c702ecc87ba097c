import sys, pickle, numpy as np
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from gemmtune.model import data as D, cv as CV, training as T, regressors as R
from gemmtune.model.metrics import rank_keys
data = D.load_dataset("data/collect/h100/collect.sqlite.gz")
dev = T._device_for(data, None)
groups = CV.shape_groups()
per = pickle.load(open(sys.argv.pop(1), "rb"))
keys = sys.argv[1:]
folds = CV.folds_by_group(data.shapes, groups, 5, 0)
orig = R._LGBMRanker.__init__
R._LGBMRanker.__init__ = lambda self, *a, **k: orig(self, *a, **{**k, "threads": 1})
for key in keys:
    g = next(g for g in data.groups if g.problem.key == key)
    fi = next(i for i, f in enumerate(folds) if g.shape in f)
    model, _ = T.fit(data.subset(data.shapes - folds[fi]), kind="lgbm_rank", device=dev)
    rk = rank_keys(model, g.problem, g.choices)
    an = np.log(model.analytic.predict_ms(g.problem, g.choices))
    t = g.times_ms; best = t.min()
    print("==", key, "trust", model.trust(g.problem))
    o = np.argsort(rk, kind="stable")
    print(" model top8:")
    for i in o[:8]: print(f"   {str(g.choices[i])[:90]:90} t/best={t[i]/best:.3f} key={rk[i]-rk[o[0]]:.3f} an={an[i]-an.min():.3f}")
    print(" measured top6:")
    for i in np.argsort(t)[:6]: print(f"   {str(g.choices[i])[:90]:90} t/best={t[i]/best:.3f} modelrank={int(np.flatnonzero(o==i)[0])} key={rk[i]-rk[o[0]]:.3f}")
