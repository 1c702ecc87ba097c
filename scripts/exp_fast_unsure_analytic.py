"""--fast with the analytic model alone (what a GPU or a triton MAJOR.MINOR without a shipped
learned model ranks with), CPU only: on every ranked problem of a results store, the first choice of
each of its two best families plus its next 1, 2, 3 or 5 choices; prints geomean % of the best
measured choice and candidates per problem (cuBLAS included). The analytic model is not trained,
so nothing is held out (fast_replay.replay with a fixed model).

    python scripts/exp_fast_unsure_analytic.py data/collect/h100/collect.sqlite.gz
"""
import math
import sys

import numpy as np

sys.path.insert(0, "scripts")
from fast_replay import replay  # noqa: E402

from gemmtune.device import DeviceInfo  # noqa: E402
from gemmtune.model.analytic import AnalyticModel  # noqa: E402
from gemmtune.model.topk import fast_pick  # noqa: E402

EXTRAS = (1, 2, 3, 5)


def main(store: str) -> None:
    rows = replay(store, lambda others, keys, order, trust, problem: {e: fast_pick(others, keys, extra=e) for e in EXTRAS},
                  model=AnalyticModel(DeviceInfo.lookup("h100")))
    for e in EXTRAS:
        frac = math.exp(np.mean([math.log(r["pol"][e][0]) for r in rows])) * 100
        print(f"analytic, next {e}: {frac:.2f}% of the best at {np.mean([r['pol'][e][1] for r in rows]):.2f} "
              f"candidates ({len(rows)} problems)")


if __name__ == "__main__":
    main(sys.argv[1])
