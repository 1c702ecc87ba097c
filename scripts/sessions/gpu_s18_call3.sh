#!/usr/bin/env bash
# Session 18, call 3: why `gemmtune bench` on the edge suite spent 5 minutes in its default tune:
# the default tune alone, with progress, a 30 s candidate timeout and the summary JSON. GPU only.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
cd $OUT
timeout ${TUNE_S:-300} python3 -m gemmtune.cli tune --suite $OLDPWD/benchmarks/suites/edge-s18.csv --timeout 30 \
  --store edge.sqlite --out edge-table.json --summary edge-summary.json > tune.log 2>&1
echo "tune rc=$?"; grep -v Warning tune.log | tail -60 | cut -c1-220
python3 - <<'PY'
import sqlite3
c = sqlite3.connect("edge.sqlite")
print("status counts:", list(c.execute("select status, count(*) from results group by status")))
for r in c.execute("select problem_key, choice_id, status, substr(reason,1,160) from results where status != 'ok' limit 25"):
    print(*r)
PY
gzip -f edge.sqlite
