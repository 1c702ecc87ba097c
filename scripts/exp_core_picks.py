"""`gemmtune bench` with --fast under session 20's CUDA-core pick (the ranker's first core choice of the
whole space) beside --fast under session 21's (up to topk.CORE_PICKS of skinny's default core tiles,
in the ranker's order), in the same run: the old rule runs in the report's "model top-1" slot, so in
this run's report that column is **not** the model's top-1. GPU only.

    python scripts/exp_core_picks.py -- <gemmtune bench arguments>
"""
import importlib
import sys

from gemmtune import cli
from gemmtune.bench import modes
from gemmtune.tuning import plan

rest = sys.argv[sys.argv.index("--") + 1:]
modes.OPTIONAL_MODES["gemmtune_top1"] = {"fast": True}
tune_module = importlib.import_module("gemmtune.tune")
_tune, _select = tune_module.tune, plan.select_fast


def tune(*args, **kwargs):
    """The bench names each mode's store after the mode: the top-1 slot plans without the device,
    which is session 20's core pick."""
    if "gemmtune_top1" not in str(kwargs.get("store", "")):
        return _tune(*args, **kwargs)
    plan.select_fast = lambda problem, cands, model, device=None: _select(problem, cands, model)
    try:
        return _tune(*args, **kwargs)
    finally:
        plan.select_fast = _select


tune_module.tune = tune
sys.exit(cli.main(["bench", *rest, "--extra-modes", "top1"]))
