#!/usr/bin/env bash
# Session 60, call 6 (GPU only; no carry; ~3 min). The tall class with N = 1-16 (a value or reward head, a router):
# cuBLAS runs 100003x1x256 at 30% of the floor and 2048x1x2048 at 33% (session 58). Its transposed problem,
# C^T = B^T A^T, is a decode GEMV on a K-contiguous weight (A^T), skinny's best case. One tune run of each tall
# problem beside its transposed twin (tall_t.csv), the default space of every family and cuBLAS: whether serving the
# twin would pay. (For N > 1 the twin's output here is contiguous, not C^T's strided view.)
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 400 python3 -m gemmtune.cli tune --suite scripts/sessions/tall_t.csv --store $OUT/tall.sqlite --out $OUT/tall-table.json \
  --summary $OUT/tall-summary.json > $OUT/tall.log 2>&1; echo "tune rc=$?"
tail -5 $OUT/tall.log
python3 - $OUT/tall.sqlite <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
rows = con.execute("select problem_key, m, n, k, min(case when choice_id='aten' then device_ms end), "
                   "min(case when choice_id!='aten' then device_ms end) from results where status='ok' group by problem_key").fetchall()
for key, m, n, k, cub, tri in sorted(rows, key=lambda r: (r[3], max(r[1], r[2]))):
    best = con.execute("select choice_id from results where problem_key=? and status='ok' and choice_id!='aten' order by device_ms limit 1", (key,)).fetchone()
    floor = (m * k + k * n + m * n) * 2 / 4368e3
    print(f"{m:6d}x{n:6d}x{k:5d} {key.split(':')[-1]:14s} floor {floor:7.2f} us  cuBLAS {cub*1e3:7.2f}  best Triton {tri*1e3:7.2f} ({best[0] if best else '-'})  x{cub/tri:.2f}")
PY
gzip -f $OUT/tall.sqlite
echo "call took $(( $(date +%s) - T0 )) s"
