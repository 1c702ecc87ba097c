"""DecomposeK's default splits, old rule against new, on shapes of suite CSVs: every split of its
exhaustive space measured (and cuBLAS), then what each rule's six would have kept. GPU only.

    python scripts/exp_decompose_default.py SUITE.csv [SUITE.csv ...] [--groups splitk,decode] [--out DIR]

Old rule: the first six of ``candidate_splits`` (powers of two from 2). New rule:
``decompose_k_spec.default_splits`` (the six nearest one program per SM). Writes
exp_decompose_default.json and .md under ``--out`` (default $OUT or .), and the store it measured into.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("suites", nargs="+")
    ap.add_argument("--groups", help="only these comma-separated groups")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = ap.parse_args(argv)

    import torch

    from gemmtune import tune
    from gemmtune.kernels.decompose_k_spec import candidate_splits, default_splits
    from gemmtune.shapes import load_suite

    if not torch.cuda.is_available():
        print("exp_decompose_default: needs a CUDA GPU", file=sys.stderr)
        return 2
    groups = set(args.groups.split(",")) if args.groups else None
    shapes = [s for suite in args.suites for s in load_suite(suite) if groups is None or s.group in groups]
    problems = [s.problem for s in shapes]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    store = args.out / "exp_decompose_default.sqlite"
    t0 = time.time()
    tune(problems, families=["decompose_k", "aten"], space="exhaustive", store=str(store), progress=False)
    wall = time.time() - t0
    db = sqlite3.connect(store)
    rows = []
    for p in problems:
        got = dict(db.execute("SELECT choice_id, device_ms FROM results WHERE problem_key = ? AND status = 'ok'",
                              (p.key,)).fetchall())
        dk = {int(c.split(":s")[1]): t for c, t in got.items() if c.startswith("decompose_k:s")}
        if not dk:
            continue
        old = [s for s in candidate_splits(p.k)[:6] if s in dk]
        new = [s for s in default_splits(p.m, p.n, p.k, sms) if s in dk]
        best = min(dk, key=dk.get)
        row = {"problem": p.key, "aten_ms": got.get("aten"), "best_split": best, "best_ms": dk[best],
               "old_splits": old, "new_splits": new,
               "old_ms": min((dk[s] for s in old), default=None), "new_ms": min((dk[s] for s in new), default=None)}
        rows.append(row)
    ok = [r for r in rows if r["old_ms"] and r["new_ms"]]

    def g(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    summary = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
               "triton": __import__("triton").__version__, "date": time.strftime("%Y-%m-%d"), "sms": sms,
               "problems": len(rows), "tune_s": round(wall, 1),
               "old_fraction_of_best_geomean": g([r["best_ms"] / r["old_ms"] for r in ok]),
               "new_fraction_of_best_geomean": g([r["best_ms"] / r["new_ms"] for r in ok]),
               "old_beats_cublas": sum(1 for r in ok if r["aten_ms"] and r["old_ms"] < r["aten_ms"]),
               "new_beats_cublas": sum(1 for r in ok if r["aten_ms"] and r["new_ms"] < r["aten_ms"]),
               "rows": rows}
    with open(args.out / "exp_decompose_default.json", "w") as f:
        json.dump(summary, f, indent=1)
    lines = [f"# DecomposeK default splits, old (first six powers of two) vs new (nearest one wave): "
             f"{summary['gpu']}, {summary['date']}", "",
             "| problem | cuBLAS µs | best split | best µs | old six best µs | new six best µs |",
             "|---|---:|---:|---:|---:|---:|"]

    def f(x):
        return "-" if x is None else f"{x * 1e3:.2f}"
    for r in rows:
        lines.append(f"| {r['problem']} | {f(r['aten_ms'])} | s{r['best_split']} | {f(r['best_ms'])} | "
                     f"{f(r['old_ms'])} | {f(r['new_ms'])} |")
    lines += ["", f"Geomean fraction of the best split: old {summary['old_fraction_of_best_geomean']:.3f}, "
              f"new {summary['new_fraction_of_best_geomean']:.3f}; faster than cuBLAS: old "
              f"{summary['old_beats_cublas']}, new {summary['new_beats_cublas']} of {len(ok)}."]
    text = "\n".join(lines) + "\n"
    with open(args.out / "exp_decompose_default.md", "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
