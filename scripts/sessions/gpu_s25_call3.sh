#!/usr/bin/env bash
# Session 25, call 3: 60 random problems (odd and aligned sizes, three dtypes, both layouts of
# each operand) tuned with --fast and each winner checked again on fresh operands in three forms
# (scripts/fuzz_tune.py). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 500 python3 scripts/fuzz_tune.py --n 60 --seed 25 --out $OUT > $OUT/fuzz.log 2>&1
echo "fuzz rc=$?"; tail -75 $OUT/fuzz.log | cut -c1-260
rm -f $OUT/fuzz.sqlite-*; gzip -f $OUT/fuzz.sqlite
