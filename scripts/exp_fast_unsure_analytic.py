"""--fast with the analytic model alone (what a GPU or a triton MAJOR.MINOR without a shipped
learned model ranks with), CPU only: on every ranked problem of a results store, the first choice of
each of its two best families plus its next 1, 2, 3 or 5 choices; prints geomean % of the best
measured choice and candidates per problem (cuBLAS included). The analytic model is not trained,
so nothing is held out.

    python scripts/exp_fast_unsure_analytic.py data/collect/h100/collect.sqlite.gz
"""
import math
import sys

import numpy as np

from gemmtune.device import DeviceInfo
from gemmtune.model import cv as cvmod
from gemmtune.model.analytic import AnalyticModel
from gemmtune.model.data import load_dataset
from gemmtune.model.topk import fast_pick, rank_keys, twin_indices

EXTRAS = (1, 2, 3, 5)


def main(store: str) -> None:
    data = load_dataset(store)
    model = AnalyticModel(DeviceInfo.lookup("h100"))
    frac = {e: [] for e in EXTRAS}
    cands = {e: [] for e in EXTRAS}
    for g in data.ranked(cvmod.MIN_RANKED_CHOICES).groups:
        base = np.array([c.family == "aten" and not c.pad for c in g.choices])
        rest = np.flatnonzero(~base)
        if not len(rest):
            continue
        others = [g.choices[j] for j in rest]
        keys = rank_keys(model, g.problem, others)
        best = g.times_ms.min()
        floor = g.times_ms[base].min() if base.any() else np.inf
        for e in EXTRAS:
            idx = rest[np.asarray(twin_indices(others, fast_pick(others, keys, extra=e)), dtype=int)]
            frac[e].append(best / min(floor, g.times_ms[idx].min()))
            cands[e].append(int(base.sum()) + len(idx))
    for e in EXTRAS:
        print(f"analytic, next {e}: {100 * math.exp(np.mean(np.log(frac[e]))):.2f}% of the best at "
              f"{np.mean(cands[e]):.2f} candidates ({len(frac[e])} problems)")


if __name__ == "__main__":
    main(sys.argv[1])
