"""Measure one family's rows of a results store again, after a kernel change made them stale. GPU only.

    python scripts/remeasure_family.py --store-gz data/collect/h100/collect.sqlite.gz \
        --family decompose_k --max-mn 135168 [--out DIR]

Takes the store's rows of ``--family`` (not its ``pad+`` variants) measured on this GPU, on
problems with M x N below ``--max-mn``, out of a copy of the store (kept in ``old-rows.csv.gz``),
then measures that family's exhaustive space on those problems again into the copy with the
collection's timer profile (``gemmtune.tune(..., timing="quick")``: CUDA graphs, L2-cold, fp64
check first). Writes under ``--out`` (default $OUT or .): the new store ``collect.sqlite.gz``, the
old rows, and ``remeasure.json``: per problem the family's best time before and after, and the
store's best other choice.

Why (session 24): DecomposeK's sum kernel was spread over the GPU in session 23 (one program per
1024 outputs before, so a small output was summed by a few programs: 32x32x28672 at 112 splits
went from 18.5 to 6.6 us). Rows measured before that rate the family too slow exactly where it
competes, on small M x N, and the ranker learned from them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store-gz", type=Path, required=True)
    ap.add_argument("--family", required=True)
    ap.add_argument("--max-mn", type=int, default=135168, help="only problems with M*N below this")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    ap.add_argument("--limit", type=int, help="only the first N problems (a trial run)")
    args = ap.parse_args(argv)

    import torch

    from gemmtune import tune
    from gemmtune.problem import Problem

    if not torch.cuda.is_available():
        print("remeasure_family: needs a CUDA GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    work.mkdir(exist_ok=True)
    path = work / "collect.sqlite"
    with gzip.open(args.store_gz, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    db = sqlite3.connect(path)
    where = ("family = ? AND choice_id NOT LIKE 'pad+%' AND m * n < ? AND device_name = ?")
    params = (args.family, args.max_mn, gpu)
    cols = [r[1] for r in db.execute("PRAGMA table_info(results)")]
    old = db.execute(f"SELECT * FROM results WHERE {where}", params).fetchall()
    keys = sorted({r[cols.index("problem_key")] for r in old})
    if args.limit:
        keys = keys[:args.limit]
        old = [r for r in old if r[cols.index("problem_key")] in set(keys)]
    with gzip.open(args.out / "old-rows.csv.gz", "wt") as f:
        f.write(",".join(cols) + "\n")
        for r in old:
            f.write(",".join(json.dumps(v) if isinstance(v, str) else str(v) for v in r) + "\n")
    before = {}
    for r in old:
        k, ms = r[cols.index("problem_key")], r[cols.index("device_ms")]
        if r[cols.index("status")] == "ok" and ms is not None:
            before[k] = min(before.get(k, float("inf")), ms)
    qmarks = ",".join("?" * len(keys))
    db.execute(f"DELETE FROM results WHERE {where} AND problem_key IN ({qmarks})", (*params, *keys))
    db.commit()
    db.close()
    print(f"{len(old)} {args.family} rows of {len(keys)} problems taken out; measuring again", flush=True)
    t0 = time.time()
    problems = [Problem.from_key(k) for k in keys]
    tune(problems, families=[args.family], space="exhaustive", store=str(path), timing="quick", progress=False)
    wall = time.time() - t0
    db = sqlite3.connect(path)
    per = []
    for k in keys:
        new = db.execute("SELECT MIN(device_ms), COUNT(*) FROM results WHERE problem_key = ? AND family = ? "
                         "AND choice_id NOT LIKE 'pad+%' AND status = 'ok' AND device_name = ?",
                         (k, args.family, gpu)).fetchone()
        other = db.execute("SELECT MIN(device_ms) FROM results WHERE problem_key = ? AND family != ? "
                           "AND status = 'ok' AND device_name = ?", (k, args.family, gpu)).fetchone()[0]
        aten = db.execute("SELECT device_ms FROM results WHERE problem_key = ? AND choice_id = 'aten' "
                          "AND device_name = ?", (k, gpu)).fetchone()
        per.append({"problem": k, "before_ms": before.get(k), "after_ms": new[0], "rows_after": new[1],
                    "best_other_ms": other, "aten_ms": aten[0] if aten else None})
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with open(path, "rb") as src, gzip.open(args.out / "collect.sqlite.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.rmtree(work)
    wins_before = sum(1 for p in per if p["before_ms"] and p["best_other_ms"] and p["before_ms"] < p["best_other_ms"])
    wins_after = sum(1 for p in per if p["after_ms"] and p["best_other_ms"] and p["after_ms"] < p["best_other_ms"])
    speed = [p["before_ms"] / p["after_ms"] for p in per if p["before_ms"] and p["after_ms"]]
    speed.sort()
    summary = {"gpu": gpu, "torch": torch.__version__, "triton": __import__("triton").__version__,
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "family": args.family,
               "max_mn": args.max_mn, "problems": len(keys), "rows_taken_out": len(old),
               "rows_after": sum(p["rows_after"] for p in per), "wall_s": round(wall, 1),
               "family_best_before_over_after_median": speed[len(speed) // 2] if speed else None,
               "problems_family_beats_all_others_before": wins_before,
               "problems_family_beats_all_others_after": wins_after, "per_problem": per}
    with open(args.out / "remeasure.json", "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "per_problem"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
