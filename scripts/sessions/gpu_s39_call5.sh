#!/usr/bin/env bash
# Session 39, after the skinny space's program cap became a cap on K splits only (~2 min; GPU only).
# 1. skinny's GPU tests (the default space verified against fp64 on the GPU, the -pdl chains).
# 2. exp_gemv_wide again: the default space's best strip on the wide GEMVs (1 x 28672 x 4096, the LM
#    heads) should now be the BN 2-4 strips that call 2 measured outside the old rules.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 150 python3 -m pytest -q -n 8 -m gpu tests/test_skinny.py tests/test_space.py -p no:cacheprovider > $OUT/gpu_tests_skinny.txt 2>&1
echo "skinny gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests_skinny.txt | tail -5
timeout 150 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_after.json --budget-s 120 > $OUT/gemv_wide_after.log 2>&1
echo "exp_gemv_wide rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide_after.log | sed -E 's/ \| next:.*//' | tail -13
