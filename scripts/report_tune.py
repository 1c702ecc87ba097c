"""Markdown report of one GPU tuning run (+ the torch.compile run of the same call).

    python scripts/report_tune.py RUN_DIR [--title TEXT] > RUN_DIR/report.md

The same as ``gemmtune report --tune-run RUN_DIR``; the logic lives in
gemmtune.report.render_tune_run. RUN_DIR holds what scripts/gpu_run.sh wrote:
tune-summary.json, tune-run.json, env.txt and optionally inductor.json.
"""

import argparse
import sys
from pathlib import Path

try:
    from gemmtune.report import render_tune_run
except ImportError:  # run from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from gemmtune.report import render_tune_run

ap = argparse.ArgumentParser()
ap.add_argument("run_dir")
ap.add_argument("--title", default="gemmtune tune, default space")
args = ap.parse_args()
sys.stdout.write(render_tune_run(args.run_dir, args.title))
