import sys, json, math
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "scripts"))
import numpy as np
from gemmtune.model.topk import fast_pick
from fast_replay import print_policies, replay

def canon(c, p):
    cfg = c.config
    if hasattr(cfg, "group_m") and hasattr(cfg, "block_m") and c.family != "skinny":
        if -(-p.m // cfg.block_m) == 1 or -(-p.n // cfg.block_n) == 1:
            return ("pad+" if c.pad else "") + c.family + ":" + cfg.id.replace(f"-G{cfg.group_m}", "-G*")
    return ("pad+" if c.pad else "") + c.id

def policies(others, keys, order, trust, problem):
    pol = {}
    p = fast_pick(others, keys, extra=0)
    extra = next((int(j) for j in order if int(j) not in p), None)
    pol["fast+next"] = p + ([extra] if extra is not None else [])
    seen = {canon(others[j], problem) for j in p}
    extra = next((int(j) for j in order if int(j) not in p and canon(others[int(j)], problem) not in seen), None)
    pol["fast+next_dedup"] = p + ([extra] if extra is not None else [])
    for k in (3, 5):
        pol[f"top{k}"] = [int(j) for j in order[:k]]
        out, seen = [], set()
        for j in order:
            c = canon(others[int(j)], problem)
            if c in seen: continue
            seen.add(c); out.append(int(j))
            if len(out) == k: break
        pol[f"top{k}_dedup"] = out
    return pol

rows = replay(sys.argv[1], policies)
json.dump(rows, open(sys.argv[2], "w"))
print_policies([("all", rows)] + [(f"group:{g}", [r for r in rows if r["group"] == g])
                                 for g in sorted({r["group"] for r in rows})], width=16)
