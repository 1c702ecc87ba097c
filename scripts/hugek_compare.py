"""Per problem of a tune store: cuBLAS (aten), the best split-K with at most 128 K-slices and the best
with more (the split space passes 128 only on one or two output tiles), from one process's timings.

    python scripts/hugek_compare.py STORE.sqlite
"""
import json
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
rows = db.execute("select problem_key, choice_id, family, device_ms, params_json from results "
                  "where status = 'ok'").fetchall()
by = {}
for key, cid, fam, ms, params in rows:
    d = by.setdefault(key, {})
    split = json.loads(params or "{}").get("split_k", 1) if fam == "splitk" else None
    slot = "aten" if cid == "aten" else "split<=128" if split is not None and split <= 128 else \
        "split>128" if split is not None else fam
    if slot not in d or ms < d[slot][0]:
        d[slot] = (ms, cid)
print(f"{'problem':44s} {'aten us':>9s} {'<=128 us':>9s} {'>128 us':>9s} {'skinny us':>9s}  >128 vs <=128  best >128")
for key, d in sorted(by.items()):
    def us(s):
        return f"{d[s][0] * 1e3:9.2f}" if s in d else f"{'-':>9s}"
    gain = f"{d['split<=128'][0] / d['split>128'][0]:.2f}x" if "split<=128" in d and "split>128" in d else "-"
    print(f"{key[:44]:44s} {us('aten')} {us('split<=128')} {us('split>128')} {us('skinny')}  {gain:>12s}  "
          f"{d.get('split>128', (0, '-'))[1]}")
