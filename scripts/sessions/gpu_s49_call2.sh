#!/usr/bin/env bash
# Session 49, call 2 (GPU only; no carry; ~7 min). (1) The two classes call 1 found outside the
# public suite, drawn at random (scripts/random_suite.py --seed 49, tall=4, smallk=10): cuBLAS,
# Inductor max-autotune, --fast, the default space and model top-5, % of floor per method.
# (2) The smallk rows' default space tuned with the store kept (every candidate's timing), for
# judging a --fast pick rule offline. (3) compute-sanitizer memcheck over the atomic and
# workspace kernels (split-K, skinny stream-K, DecomposeK) with fp32 operands: 3xTF32, three
# tensor-core dots into the same accumulators and workspaces (session 48 shipped it without one).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
python3 scripts/random_suite.py --seed 49 --per-group decode=0,splitk=0,odd=0,prefill=0,square=0,tall=4,smallk=10 --out $OUT/rand49.csv
timeout 300 python3 -m gemmtune.cli bench --suite $OUT/rand49.csv --skip-tunableop \
  --deadline $(( T0 + 280 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | head
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -A6 "Tuning wall" $OUT/bench/*.md
rm -f $OUT/bench/*.png
(head -1 $OUT/rand49.csv; grep "^smallk" $OUT/rand49.csv) > $OUT/smallk49.csv
timeout 120 python3 -m gemmtune.cli tune --suite $OUT/smallk49.csv --store /tmp/smallk-default.sqlite \
  --out /tmp/t.json --summary $OUT/bench/smallk_default_summary.json > $OUT/bench/smallk_default.log 2>&1
echo "tune rc=$?"; tail -3 $OUT/bench/smallk_default.log
python3 -c "
from gemmtune.store import ResultStore
with ResultStore('/tmp/smallk-default.sqlite') as s: s.export('$OUT/bench/smallk-default-rows.csv')
" && gzip $OUT/bench/smallk-default-rows.csv
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
SANITIZE_DTYPE=float32 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 \
  python3 scripts/sanitize_kernels.py splitk,skinny,decompose_k,prepared > $OUT/memcheck_fp32.log 2>&1
echo "memcheck fp32 rc=$?"; grep -E "ERROR SUMMARY|sanitize:|WRONG|skipped" $OUT/memcheck_fp32.log | head
echo "call took $(( $(date +%s) - T0 )) s"
