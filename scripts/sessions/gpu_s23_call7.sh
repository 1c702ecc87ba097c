#!/usr/bin/env bash
# Session 23, call 7: DecomposeK's every split count on small M x N with a long K
# (scripts/exp_decompose_splits.py). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 280 python3 scripts/exp_decompose_splits.py --out $OUT/decompose_splits.json > $OUT/decompose_splits.log 2>&1
echo "rc=$?"; grep -v Warning $OUT/decompose_splits.log | tail -24
