import sys, time, json, functools
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "src"))
import numpy as np
from gemmtune.model import data as D, cv as CV, training as T, features as F, learned as L
from gemmtune.model.metrics import summarize
from gemmtune.tuning.plan import candidates

store, pool_store, variant, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
FAMS = ("triton_mm", "triton_static", "splitk", "skinny", "persistent_tma", "decompose_k", "aten")
_orig = F.featurize

@functools.lru_cache(maxsize=None)
def default_ids(problem, devname):
    from gemmtune.device import DeviceInfo
    dev = DeviceInfo.lookup(devname)
    return frozenset(c.id for c in candidates(problem, FAMS, "default", dev))

def featurize(problem, choices, device, *, analytic=None, choice_batch=None):
    X = _orig(problem, choices, device, analytic=analytic, choice_batch=choice_batch)
    ids = default_ids(problem, device.name)
    cs = choices if choices is not None else CUR[0]
    assert len(cs) == X.shape[0]
    col = np.array([float(c.id in ids) for c in cs])
    return np.concatenate([X, col[:, None]], 1)

CUR = [None]
_orig_rk = L.LearnedModel.rank_keys
def _rk(self, problem, choices):
    CUR[0] = list(choices)
    return _orig_rk(self, problem, choices)
if variant == "indef":
    T.featurize = featurize; L.featurize = featurize; L.LearnedModel.rank_keys = _rk

data = D.load_dataset(store)
data, _ = D.exclude(data, D.public_shapes())
if pool_store != "-":
    data = D.pool(data, [D.exclude(D.load_dataset(pool_store), D.public_shapes())[0]])
dev = T._device_for(data, None)
groups = CV.shape_groups()
per = []
t0 = time.time()
for i, fold in enumerate(CV.folds_by_group(data.shapes, groups, 5, seed)):
    tr = data.subset(data.shapes - fold)
    te = data.subset(fold).native().ranked()
    model, _ = T.fit(tr, kind="lgbm_rank", seed=seed, device=dev)
    per += CV.score(model, te)
s = summarize(per)
print(json.dumps({"variant": variant, "seed": seed, "store": store[-40:], "top1": round(s["top1_within_10pct"] * 100, 2),
                  "top5reg": round(s["top5_regret_geomean"] * 100, 2), "n": len(per), "s": round(time.time() - t0)}), flush=True)
