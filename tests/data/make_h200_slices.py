"""Make two small slices of REAL H200 bf16 timings for the model tests (CI stays fast).

    python tests/data/make_h200_slices.py

* ``h200_collect_slice.csv.gz``: 40 of the 184 shapes collected on 2026-11-22
  (data/collect/collect.sqlite.gz; see data/collect/README.md), picked at random
  (seed 5) in proportion to their groups (llm, decode), every measured choice of each.
* ``h200_public_bf16.csv.gz``: every bf16 problem of the public suite measured on the
  same H200 and software (benchmarks/results/2026-11-21-h200-public-full, with the odd
  and splitk problems of 2026-11-21-h200-odd-splitk-pad, which measured the current
  zero-padding pad+). No model is ever trained on these: the public suite is for
  evaluation only, which makes them held-out shapes for the shipped model, which was
  trained on all collected shapes.

Only the columns ``load_dataset`` reads are kept; the times are copied, not changed.
Rows of the same (problem, choice) measured more than once are written as their
geometric mean (what load_dataset would make of them anyway).
"""

from __future__ import annotations

import csv
import gzip
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

import eval_model  # noqa: E402
from gemmtune.model.learned import Dataset, load_dataset  # noqa: E402

COLUMNS = ("device_name", "capability", "torch_version", "triton_version", "gemmtune_version", "problem_key",
           "choice_id", "status", "device_ms")
SLICE_SHAPES = 40
SEED = 5


def write(data: Dataset, path: Path) -> None:
    ctx = data.context
    with gzip.open(path, "wt", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for g in data.groups:
            for c, t in zip(g.choices, g.times_ms):
                w.writerow([ctx["device_name"], ctx["capability"], ctx["torch_version"], ctx["triton_version"],
                            ctx["gemmtune_version"], g.problem.key, c.id, "ok", repr(float(t))])
    print(f"{path}: {data.rows} rows, {len(data.groups)} problems, {path.stat().st_size / 1024:.0f} KiB")


def main() -> None:
    data = load_dataset(eval_model.DATA)
    groups = eval_model.shape_groups()
    by = defaultdict(list)
    for s in sorted(data.shapes):
        by[groups.get(s, "?")].append(s)
    rng = np.random.default_rng(SEED)
    picked = []
    for name in sorted(by):
        n = round(SLICE_SHAPES * len(by[name]) / len(data.shapes))
        picked += [by[name][i] for i in sorted(rng.choice(len(by[name]), size=n, replace=False))]
    write(data.subset(picked), HERE / "h200_collect_slice.csv.gz")
    write(eval_model.public_dataset(), HERE / "h200_public_bf16.csv.gz")


if __name__ == "__main__":
    main()
