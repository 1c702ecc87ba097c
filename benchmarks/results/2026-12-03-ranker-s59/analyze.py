"""What the two-stage rules change, from per_problem.json.gz (written by twostage.py): per run,
stage A's held-out AUC, how many top-1 decisions each rule flips and how many of those flips win
or lose a hit, and (runs that recorded them) the bound with a perfect stage A."""
import gzip
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
per = json.loads(gzip.decompress((HERE / "per_problem.json.gz").read_bytes()))
hit = lambda r: r <= 0.1 + 1e-12  # noqa: E731


def auc(p, y):
    p, y = np.asarray(p), np.asarray(y, dtype=bool)
    r = np.argsort(np.argsort(p, kind="stable"), kind="stable") + 1.0
    # average ranks for ties
    for v in np.unique(p):
        m = p == v
        r[m] = r[m].mean()
    npos, nneg = y.sum(), (~y).sum()
    return float((r[y].sum() - npos * (npos + 1) / 2) / (npos * nneg))


print("| run | scored | aten rows | aten ok | AUC | ranker puts aten first | of them aten not ok | "
      "demote flips (win/lose) | switch flips (win/lose) | both flips (win/lose) | oracle demote | oracle switch |")
print("|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|")
for name, rows in per.items():
    a = [r for r in rows if r["has_aten"]]
    ok = [r["aten_ok"] for r in a]
    first = [r for r in a if r["ranker_first_is_aten"]]
    bad_first = sum(not r["aten_ok"] for r in first)
    cells = []
    for rule in ("demote", "switch", "both"):
        flips = [r for r in rows if abs(r[rule][0] - r["baseline"][0]) > 1e-15]
        win = sum(hit(r[rule][0]) and not hit(r["baseline"][0]) for r in flips)
        lose = sum(hit(r["baseline"][0]) and not hit(r[rule][0]) for r in flips)
        cells.append(f"{len(flips)} ({win}/{lose})")
    n = len(rows)
    if all("other_first_regret" in r for r in a):
        # perfect stage A: demote only where aten first and not ok; switch: aten first iff ok
        od = sum(hit(r["other_first_regret"]) if (r["has_aten"] and r["ranker_first_is_aten"] and not r["aten_ok"])
                 else hit(r["baseline"][0]) for r in rows)
        osw = sum((hit(r["aten_first_regret"]) if r["aten_ok"] else hit(r["other_first_regret"])) if r["has_aten"]
                  else hit(r["baseline"][0]) for r in rows)
        oracle = [f"{100 * od / n:.2f}%", f"{100 * osw / n:.2f}%"]
    else:
        oracle = ["-", "-"]
    print(f"| {name} | {n} | {len(a)} | {sum(ok)} | {auc([r['p_aten_ok'] for r in a], ok):.3f} | {len(first)} | "
          f"{bad_first} | {' | '.join(cells)} | {' | '.join(oracle)} |")
