"""H100 problems also measured on the H200 (same problem key): is the H200's fastest of the choices
measured on both within 10% of the H100's best measured choice? Needs /tmp/pooled/{h100,h200}.pkl,
which pooled.py writes.

    PYTHONPATH=src python benchmarks/results/2026-11-26-pooled-ranker/transfer.py
"""
import pickle

import numpy as np


def load(gpu: str):
    with open(f"/tmp/pooled/{gpu}.pkl", "rb") as f:
        return pickle.load(f)


h100, h200 = load("h100"), load("h200")
by_key = {g.problem.key: g for g in h200.groups}
scored = h100.ranked().groups
n = hits = 0
shares = []
for g in scored:
    h = by_key.get(g.problem.key)
    if h is None:
        continue
    ta = {c.id: t for c, t in zip(g.choices, g.times_ms)}
    tb = {c.id: t for c, t in zip(h.choices, h.times_ms)}
    common = [c for c in ta if c in tb]
    shares.append(len(common) / len(ta))
    if len(common) < 20:
        continue
    pick = min(common, key=lambda c: tb[c])
    n += 1
    hits += ta[pick] <= 1.1 * min(ta.values()) + 1e-12
print(f"H100 problems (>= 20 choices) whose key is in the H200 store: {len(shares)} of {len(scored)}")
print(f"median share of an H100 problem's choices also measured on the H200: {np.median(shares):.3f}")
print(f"problems with >= 20 common choices: {n}; the H200's fastest common choice within 10% of the H100's "
      f"best: {hits} ({hits / n:.3f})")
