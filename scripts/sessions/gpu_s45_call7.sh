#!/usr/bin/env bash
# Session 45, call 7 (GPU only; no carry; ~7 min): the final tree's GPU test lane (-m gpu, last run
# whole in session 43: 310 passed), then two fuzz_patch models on a fourth seed with --compile.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 300 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -15 $OUT/gpu_tests.txt
mkdir -p $OUT/p49
timeout 70 python3 scripts/fuzz_patch.py --n 2 --seed 49 --compile --out $OUT/p49 > $OUT/fuzz_patch49.log 2>&1
echo "fuzz_patch seed 49 rc=$?"; tail -8 $OUT/fuzz_patch49.log | grep -v '^{"d"'
