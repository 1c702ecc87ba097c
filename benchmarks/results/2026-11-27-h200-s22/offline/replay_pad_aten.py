import sys, json, math
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "scripts"))
import numpy as np
from gemmtune.model.topk import fast_pick
from fast_replay import replay

def policies(others, keys, order, trust, problem):
    pol = {}
    p = fast_pick(others, keys, extra=0)
    extra = next((int(j) for j in order if int(j) not in p), None)
    base = p + ([extra] if extra is not None else [])
    pol["fast+next"] = base
    pa = [i for i, c in enumerate(others) if c.family == "aten" and c.pad]
    pol["fast+next+padaten"] = base + [i for i in pa if i not in base]
    return pol

rows = replay(sys.argv[1], policies)
def summ(rs, name):
    f = np.array([r["pol"][name][0] for r in rs]); n = np.array([r["pol"][name][1] for r in rs])
    return f"{np.exp(np.log(f).mean())*100:6.2f}% min {f.min()*100:5.1f} >=97 {(f>=0.97).mean()*100:5.1f}% cand {n.mean():.2f}"
unal = [r for r in rows if "u/" in r["key"] or r["key"].endswith("u")]
for sub, rs in [("all", rows), ("unaligned", unal)]:
    print(f"== {sub} ({len(rs)})")
    for name in rows[0]["pol"]:
        print(f"  {name:20s} {summ(rs, name)}")
