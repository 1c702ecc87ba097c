#!/usr/bin/env bash
# Session 48, call 4 (GPU only; no carry; ~1 min): `gemmtune tune --fast` on the 11 fp32 shapes of
# call 3 with the analytic model's 3xTF32 picks (topk.x3_pick_applies), against call 3's default
# space (best kernel) and --fast without them.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
python3 -m gemmtune.cli tune --suite benchmarks/suites/fp32-s48.csv --fast --store /tmp/s.sqlite \
  --out /tmp/t.json --summary $OUT/fast_summary.json > $OUT/fast.log 2>&1
echo "tune rc=$?"; tail -25 $OUT/fast.log
