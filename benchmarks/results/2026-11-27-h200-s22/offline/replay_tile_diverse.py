import sys, json, math
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "scripts"))
import numpy as np
from gemmtune.model.topk import fast_pick
from fast_replay import print_policies, replay

def tile(c):
    cfg = c.config
    t = getattr(cfg, "tile", cfg)
    if hasattr(t, "block_m"):
        return (t.block_m, t.block_n, t.block_k)
    return None

def policies(others, keys, order, trust, problem):
    pol = {}
    p = fast_pick(others, keys, extra=0)
    nxt = next((int(j) for j in order if int(j) not in p), None)
    pol["fast+next"] = p + ([nxt] if nxt is not None else [])
    tiles = {tile(others[j]) for j in p}
    nd = next((int(j) for j in order if int(j) not in p and (tile(others[int(j)]) is None or tile(others[int(j)]) not in tiles)), nxt)
    pol["fast+next_tilediv"] = p + ([nd] if nd is not None else [])
    return pol

rows = replay(sys.argv[1], policies)
print_policies([("all", rows)] + [(f"group:{g}", [r for r in rows if r["group"] == g])
                                 for g in sorted({r["group"] for r in rows})], width=20)
