#!/usr/bin/env bash
# Prepared at the end of session 36 for session 37 (~6 min; GPU only; no carry). Run FIRST.
# 1. Every GPU-marked test after session 36's changes. New ones: the -pdl GEMV strips
#    (tests/test_skinny.py: a CUDA-graph chain whose GEMVs read the kernel before's output; the
#    prepared launch; a dispatcher of a -pdl choice).
# 2. compute-sanitizer (memcheck) over those -pdl tests: the kernel loads its first weight tile
#    before gdc_wait.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q -m gpu tests/test_skinny.py \
  -k pdl -p no:cacheprovider > $OUT/sanitizer_pdl.txt 2>&1
echo "compute-sanitizer memcheck (pdl tests) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_pdl.txt | tail -3
