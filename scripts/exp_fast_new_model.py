"""`gemmtune bench` with one more method: --fast ranked by another model file (a candidate ranker),
beside --fast with the shipped one, in the same run. It borrows the report's "model top-1" slot
(``--extra-modes top1``), so in this run's report that column is **--fast with MODEL**, not the
model's top-1. GPU only.

    python scripts/exp_fast_new_model.py MODEL.json -- <gemmtune bench arguments>
"""
import sys

from gemmtune import cli
from gemmtune.bench import modes

model, rest = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
modes.OPTIONAL_MODES["gemmtune_top1"] = {"fast": True, "model": model}
sys.exit(cli.main(["bench", *rest, "--extra-modes", "top1"]))
