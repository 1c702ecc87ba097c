"""--policies replay with the lgbm_rank default num_leaves set to argv[1] (same code otherwise)."""
import sys
from gemmtune.model import regressors as R
leaves = int(sys.argv[1])
d = list(R._LGBMRanker.__init__.__defaults__)
names = R._LGBMRanker.__init__.__code__.co_varnames[1:1 + len(d)]
d[names.index("num_leaves")] = leaves
R._LGBMRanker.__init__.__defaults__ = tuple(d)
try:
    import lightgbm  # noqa: F401
except ImportError:
    pass
_orig = R._LGBMRanker.__init__
from gemmtune.cli import main
sys.exit(main(["train", "--store", "data/collect/collect.sqlite.gz",
               "--kind", "lgbm_rank", "--policies", f"/tmp/pol/out{leaves}", "--seed", "0"]))
