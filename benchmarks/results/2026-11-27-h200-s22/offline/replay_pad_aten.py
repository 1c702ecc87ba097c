import sys, json, math
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "scripts"))
import numpy as np
from gemmtune.model.topk import fast_pick
from fast_replay import print_policies, replay

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
unal = [r for r in rows if "u/" in r["key"] or r["key"].endswith("u")]
print_policies([("all", rows), ("unaligned", unal)], width=20)
