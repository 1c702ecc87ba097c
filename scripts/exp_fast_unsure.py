"""Should --fast benchmark more where the model does not trust its ranking? CPU only: replays
--fast on a results store (fast_replay.py: each problem held out once, 5-fold CV by shape) with the
model's next choices beyond its families' first ones set to 1 (session 18's --fast) or to
1 + ceil((1 - trust) x (X - 1)) for X in 2, 3, 5; prints geomean % of the best and candidates per
problem (cuBLAS included), over all problems, those trusted less than fully, and those at trust 0.

    python scripts/exp_fast_unsure.py data/collect/h100/collect.sqlite.gz
"""
import math
import sys

import numpy as np

sys.path.insert(0, "scripts")
from fast_replay import replay  # noqa: E402

from gemmtune.model.topk import fast_pick  # noqa: E402


def policies(others, keys, order, trust, problem):
    out = {"fast(extra 1)": fast_pick(others, keys, extra=1)}
    for most in (2, 3, 5):
        out[f"extra<={most}"] = fast_pick(others, keys, extra=1 + math.ceil((1 - trust) * (most - 1)))
    return out


def main(store: str) -> None:
    rows = replay(store, policies)
    for name, sel in (("all", rows), ("trust < 1", [r for r in rows if r["trust"] < 1]),
                      ("trust = 0", [r for r in rows if r["trust"] == 0])):
        if not sel:
            continue
        cells = []
        for pol in sel[0]["pol"]:
            frac = math.exp(np.mean([math.log(r["pol"][pol][0]) for r in sel])) * 100
            cells.append(f"{pol}: {frac:.2f}% at {np.mean([r['pol'][pol][1] for r in sel]):.2f}")
        print(f"{name} ({len(sel)}): " + "; ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1])
