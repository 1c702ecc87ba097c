import sys, json, numpy as np
sys.path.insert(0, "/work/main/scripts")
from fast_replay import replay
from gemmtune.model.topk import fast_pick, rank_keys
from gemmtune.model.data import load_dataset
from gemmtune.model import cv as cvmod
from gemmtune.model import default_model
from fast_replay import twin_indices

def pols(others, keys, order, trust, problem):
    return {"top1": [int(order[0])], "fast": fast_pick(others, keys)}

store = sys.argv[1]
rows = replay(store, pols)
def g(rs, n):
    f = np.array([r["pol"][n][0] for r in rs]); return f"{np.exp(np.log(f).mean())*100:6.2f}% >=0.9: {(f>=0.9).mean()*100:5.1f}% min {f.min()*100:5.1f} ({len(rs)})"
heads = [r for r in rows if r["group"] == "?"]
rest = [r for r in rows if r["group"] != "?"]
for name, rs in (("all", rows), ("heads", heads), ("rest", rest)):
    if rs:
        print(f"CV {name:6s} top1 {g(rs,'top1')} | fast {g(rs,'fast')}")
json.dump(rows, open(sys.argv[2], "w"))
# The shipped model on the head problems (it never saw them).
data = load_dataset(store)
import os
from gemmtune.model import load_model
from gemmtune.device import DeviceInfo
# OLD_MODEL: the ranker shipped before this collection (git show HEAD~:src/gemmtune/data/models/...)
shipped = (load_model(os.environ["OLD_MODEL"], DeviceInfo.lookup("h100"), triton_version="3.6.0", numpy_predict=True)
           if os.environ.get("OLD_MODEL") else default_model("h100", triton_version="3.6.0", numpy_predict=True))
hk = {r["key"] for r in heads}
out = []
for grp in data.ranked(cvmod.MIN_RANKED_CHOICES).groups:
    if grp.problem.key not in hk:
        continue
    base = np.array([c.family == "aten" and not c.pad for c in grp.choices]); rest_i = np.flatnonzero(~base)
    others = [grp.choices[j] for j in rest_i]
    keys = rank_keys(shipped, grp.problem, others)
    order = np.argsort(np.where(np.isfinite(keys), keys, np.inf), kind="stable")
    best = grp.times_ms.min(); floor = grp.times_ms[base].min() if base.any() else np.inf
    def frac(idx):
        idx = rest_i[np.asarray(twin_indices(others, idx), dtype=int)] if len(idx) else np.array([], dtype=int)
        return float(best / min(floor, grp.times_ms[idx].min() if len(idx) else np.inf))
    out.append({"top1": frac([int(order[0])]), "fast": frac(fast_pick(others, keys))})
f1 = np.array([o["top1"] for o in out]); ff = np.array([o["fast"] for o in out])
print(f"{'OLD_MODEL' if os.environ.get('OLD_MODEL') else 'shipped'} on heads ({len(out)}): top1 {np.exp(np.log(f1).mean())*100:.2f}% >=0.9 {(f1>=0.9).mean()*100:.1f}% | fast {np.exp(np.log(ff).mean())*100:.2f}% >=0.9 {(ff>=0.9).mean()*100:.1f}% min {ff.min()*100:.1f}")
