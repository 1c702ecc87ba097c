"""Measure a store's stale rows again, after a kernel or copy change made them so. GPU only.

    python scripts/remeasure_family.py --store-gz data/collect/h100/collect.sqlite.gz \
        --family decompose_k --max-mn 135168 [--out DIR]
    python scripts/remeasure_family.py --store-gz data/collect/h100/collect.sqlite.gz \
        --pad-copies-under 4194304 [--out DIR]

Takes the selected rows measured on this GPU out of a copy of the store (kept in
``old-rows.csv.gz``) and measures them again into the copy with the collection's timer profile
(``gemmtune.tune(..., timing="quick")``: CUDA graphs, L2-cold, fp64 check first):
* ``--family F --max-mn X``: the rows of family F (not its ``pad+`` variants) on problems with
  M x N below X, and then F's whole exhaustive space on those problems;
* ``--pad-copies-under BYTES``: the ``pad+`` rows of problems whose per-call copies were all under
  BYTES (B's padded copy, and A's unless A is read as it is), and then exactly those choices
  (a lookup table fixes them).
Writes under ``--out`` (default $OUT or .): the new store ``collect.sqlite.gz``, the old rows, and
``remeasure.json``: per problem the selected rows' best time before and after, the best other
choice and cuBLAS.

Why (session 24): DecomposeK's sum kernel was spread over the GPU in session 23 (one program per
1024 outputs before, so a small output was summed by a few programs: 32x32x28672 at 112 splits
went from 18.5 to 6.6 us); and pad+ copies under 4 MiB, made with two F.pad calls until session 24,
are one Triton launch now (1021x2053x509 pad+persistent_tma 23.7 -> 15.1 us). Rows measured before
rate those choices too slow exactly where they compete, and the ranker learned from them.
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
    ap.add_argument("--family", help="this family's rows (not pad+) on problems with M*N < --max-mn")
    ap.add_argument("--max-mn", type=int, default=135168, help="only problems with M*N below this")
    ap.add_argument("--pad-copies-under", type=int, metavar="BYTES",
                    help="instead: pad+ rows of problems whose per-call copies were all under BYTES")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    ap.add_argument("--limit", type=int, help="only the first N problems (a trial run)")
    args = ap.parse_args(argv)
    if (args.family is None) == (args.pad_copies_under is None):
        ap.error("give --family or --pad-copies-under")

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
    if args.family is not None:
        where = "family = ? AND choice_id NOT LIKE 'pad+%' AND m * n < ? AND device_name = ?"
        params = (args.family, args.max_mn, gpu)
    else:
        # Padded sizes as kernels.padded_sizes rounds them: N and K up to whole 16-byte vectors;
        # A is copied unless its K needs no padding (a contiguous, aligned A is read as it is).
        es = "(CASE WHEN dtype = 'float32' THEN 4 WHEN dtype IN ('float8_e4m3fn', 'float8_e5m2') THEN 1 ELSE 2 END)"
        vec = f"(16 / {es})"
        kp, np_ = f"((k + {vec} - 1) / {vec} * {vec})", f"((n + {vec} - 1) / {vec} * {vec})"
        where = (f"choice_id LIKE 'pad+%' AND {kp} * {np_} * {es} < ? AND (m * {kp} * {es} < ? OR k % {vec} = 0) "
                 "AND device_name = ?")
        params = (args.pad_copies_under, args.pad_copies_under, gpu)
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
    print(f"{len(old)} rows of {len(keys)} problems taken out; measuring again", flush=True)
    t0 = time.time()
    problems = [Problem.from_key(k) for k in keys]
    if args.family is not None:
        tune(problems, families=[args.family], space="exhaustive", store=str(path), timing="quick", progress=False)
    else:  # exactly the rows taken out: a lookup table fixes each problem's candidates
        from gemmtune import __version__
        from gemmtune.configs import Choice
        from gemmtune.table import LookupTable, TableChoice, provenance

        cap = ".".join(map(str, torch.cuda.get_device_capability()))
        table = LookupTable(provenance(gpu, cap, torch.__version__, __import__("triton").__version__, __version__,
                                       "by-hand"))
        for r in old:
            table.entries.setdefault(r[cols.index("problem_key")], []).append(
                TableChoice(Choice.parse(r[cols.index("choice_id")])))
        tune(problems, table=table, store=str(path), timing="quick", progress=False)
    wall = time.time() - t0
    db = sqlite3.connect(path)
    per = []
    for k in keys:
        new = db.execute(f"SELECT MIN(device_ms), COUNT(*) FROM results WHERE {where} AND problem_key = ? "
                         "AND status = 'ok'", (*params, k)).fetchone()
        other = db.execute(f"SELECT MIN(device_ms) FROM results WHERE NOT ({where}) AND problem_key = ? "
                           "AND status = 'ok' AND device_name = ?", (*params, k, gpu)).fetchone()[0]
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
               "max_mn": args.max_mn if args.family else None, "pad_copies_under": args.pad_copies_under,
               "problems": len(keys), "rows_taken_out": len(old),
               "rows_after": sum(p["rows_after"] for p in per), "wall_s": round(wall, 1),
               "selected_best_before_over_after_median": speed[len(speed) // 2] if speed else None,
               "problems_selected_beat_all_others_before": wins_before,
               "problems_selected_beat_all_others_after": wins_after, "per_problem": per}
    with open(args.out / "remeasure.json", "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "per_problem"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
