#!/usr/bin/env bash
# Session 18, call 1: persistent_tma's split epilogue (epi_split) on the GPU: the family's GPU
# tests, compute-sanitizer memcheck over its TMA cases, then scripts/exp_persistent_split.py
# (every default tile with epi_split 1/2/4 and the extra stages it makes room for, against cuBLAS,
# side by side). GPU only.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 150 python3 -m pytest -q tests/test_persistent.py -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/gpu_tests.txt
timeout 150 compute-sanitizer --tool memcheck --print-limit 20 python3 scripts/sanitize_kernels.py persistent_tma > $OUT/sanitize.log 2>&1
echo "memcheck rc=$?"; grep -E "persistent|ERROR|sanitize:" $OUT/sanitize.log | tail -12
timeout ${EXP_S:-400} python3 scripts/exp_persistent_split.py --out $OUT/split.json --budget-s ${BUDGET_S:-330} > $OUT/split.log 2>&1
echo "split rc=$?"; grep -v Warning $OUT/split.log | tail -16
