"""Retrain a shipped ranker the way its provenance says (``gemmtune train --kind lgbm_rank --cv 5
--ship ...``), with LightGBM on one thread (the machine was shared; ``_LGBMRanker`` takes
min(cpus, 8) threads otherwise, and LightGBM runs deterministic=True either way).

    PYTHONPATH=src python benchmarks/results/2026-12-03-ranker-s57/ship.py train --store ... --ship ...
"""

from __future__ import annotations

import functools
import sys

from gemmtune import cli
from gemmtune.model import regressors

regressors.RANKERS["lgbm_rank"] = functools.partial(regressors._LGBMRanker, threads=1)

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
