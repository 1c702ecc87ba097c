"""`gemmtune bench` with --fast under session 20's CUDA-core pick (the ranker's first core choice of the
whole space) beside --fast under session 21's (up to topk.CORE_PICKS of skinny's default core tiles,
in the ranker's order), in the same run: the old rule runs in the report's "model top-1" slot, so in
this run's report that column is **not** the model's top-1. GPU only.

    python scripts/exp_core_picks.py -- <gemmtune bench arguments>
"""
import sys
from unittest import mock

from bench_slots import run_slot_under

from gemmtune import cli
from gemmtune.bench import modes
from gemmtune.tuning import plan

rest = sys.argv[sys.argv.index("--") + 1:]
modes.OPTIONAL_MODES["gemmtune_top1"] = {"fast": True}
_select = plan.select_fast
# Session 20's core pick: planned without the device, so no default tiles are preferred.
run_slot_under("gemmtune_top1", lambda: mock.patch.object(
    plan, "select_fast", lambda problem, cands, model, device=None: _select(problem, cands, model)))
sys.exit(cli.main(["bench", *rest, "--extra-modes", "top1"]))
