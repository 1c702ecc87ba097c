"""`gemmtune bench` with two more --fast columns beside the shipped one, in the same run: --fast
ranked by a candidate model file (in the report's "model top-1" slot), and --fast with the
shipped model under the rule before session 19 (no extra picks where the model is unsure,
``model.topk.FAST_UNSURE_EXTRA = 0``; in the "model top-20" slot). So in this run's report those
two columns are **not** the model's top-1 and top-20. GPU only.

    python scripts/exp_fast_columns.py MODEL.json -- <gemmtune bench arguments>
"""
import sys
from unittest import mock

from bench_slots import run_slot_under

from gemmtune import cli
from gemmtune.bench import modes
from gemmtune.model import topk

model, rest = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
modes.OPTIONAL_MODES["gemmtune_top1"] = {"fast": True, "model": model}
modes.OPTIONAL_MODES["gemmtune_top20"] = {"fast": True}
run_slot_under("gemmtune_top20", lambda: mock.patch.object(topk, "FAST_UNSURE_EXTRA", 0))  # the old rule
sys.exit(cli.main(["bench", *rest, "--extra-modes", "top1,top20"]))
