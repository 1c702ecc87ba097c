import sys, time, pickle, math
import numpy as np
from collections import defaultdict
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "src"))
from gemmtune.model import data as D, cv as CV, training as T
from gemmtune.model.cv import _predict_ms
store = sys.argv[1]; pool_store = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None
out = sys.argv[3]
data = D.load_dataset(store)
data, _ = D.exclude(data, D.public_shapes())
if pool_store:
    data = D.pool(data, [D.exclude(D.load_dataset(pool_store), D.public_shapes())[0]])
dev = T._device_for(data, None)
groups = CV.shape_groups()
def cid(c): return f"{'pad+' if c.pad else ''}{c.family}:{c.config.id if hasattr(c.config,'id') else c.config}"
res = []
t0 = time.time()
for i, fold in enumerate(CV.folds_by_group(data.shapes, groups, 5, 0)):
    tr = data.subset(data.shapes - fold)
    te = data.subset(fold).native().ranked()
    # pooled twins of held-out shapes are dropped as in the CLI
    model, _ = T.fit(tr, kind="lgbm_rank", seed=0, device=dev)
    for g in te.groups:
        pred = np.asarray(_predict_ms(model, g.problem, g.choices), dtype=np.float64)
        res.append(dict(key=g.problem.key, problem=g.problem, ids=[cid(c) for c in g.choices],
                        fams=[c.family for c in g.choices], t=g.times_ms, pred=pred, fold=i,
                        group=groups.get(g.shape, "?")))
    print("fold", i, time.time() - t0, flush=True)
train_tab = [dict(problem=g.problem, shape=g.shape, native=g.device is None,
                  ids=[cid(c) for c in g.choices], t=g.times_ms) for g in data.groups]
pickle.dump(dict(res=res, train=train_tab, folds=[list(f) for f in CV.folds_by_group(data.shapes, groups, 5, 0)]), open(out, "wb"))
