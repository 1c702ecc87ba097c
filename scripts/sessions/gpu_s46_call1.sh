#!/usr/bin/env bash
# Session 46, call 1 (GPU only; no carry; ~7 min): the whole -m gpu lane on the tree with session
# 45's hunt fixes (relu where, workspace reset, fuse/compile/autocast, worker-pool kill, padcache),
# which ran on a GPU only as a 67-test subset; then new seeds of both fuzzers.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 300 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -15 $OUT/gpu_tests.txt
mkdir -p $OUT/p50
timeout 80 python3 scripts/fuzz_patch.py --n 3 --seed 50 --compile --out $OUT/p50 > $OUT/fuzz_patch50.log 2>&1
echo "fuzz_patch seed 50 rc=$?"; tail -8 $OUT/fuzz_patch50.log | grep -v '^{"d"'
timeout 150 python3 scripts/fuzz_tune.py --n 40 --seed 47 --out $OUT/fuzz_tune47.json > $OUT/fuzz47.log 2>&1
echo "fuzz_tune seed 47 rc=$?"; tail -6 $OUT/fuzz47.log
