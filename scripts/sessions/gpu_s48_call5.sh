#!/usr/bin/env bash
# Session 48, call 5 (GPU only; no carry; ~1.5 min): every default-space candidate of the 11 fp32
# shapes timed as 3xTF32, the store kept (data/ provenance: H200, torch 2.11, triton 3.6): what a
# --fast pick rule for 3xTF32 fp32 is judged on offline.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
python3 -m gemmtune.cli tune --suite benchmarks/suites/fp32-s48.csv --store $OUT/fp32x3-default.sqlite \
  --out /tmp/t.json --summary $OUT/default_summary.json > $OUT/default.log 2>&1
echo "tune rc=$?"; tail -4 $OUT/default.log
