#!/usr/bin/env bash
# Prepared at the end of session 38 for session 39 (~5 min; GPU only; no carry). Run FIRST.
# 1. Every GPU-marked test on session 38's final tree (bench-model's greedy check on a StaticCache
#    is new: tests/test_benchmodel.py's GPU tests run it).
# 2. (Session 39: the memcheck over skinny's -pdl tests is dropped: no kernel changed since session
#    38's 0-error run.) scripts/exp_pdl.py's folded-norm chain instead, moved here from call 2 so
#    that call 2 fits the ncu step with margin.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 260 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 100 python3 scripts/exp_pdl.py $OUT/pdl_fold --bn 4 --bk 2048 > $OUT/pdl_fold.log 2>&1
echo "exp_pdl (folded norm) rc=$?"; tail -8 $OUT/pdl_fold.log
