#!/usr/bin/env bash
# Prepared at the end of session 37 for session 38 (~5 min; GPU only; no carry). Run FIRST.
# 1. Every GPU-marked test after session 37's changes (new: tests/test_pdl.py's product path:
#    patch(pdl=True), save/load, torch.compile with Inductor's PDL on, a CUDA graph, fp64).
# 2. compute-sanitizer (memcheck) over skinny's -pdl GPU tests, now with the tl.dot and N-contiguous
#    paths' chains (the product path's test compiles with Inductor: too slow under memcheck).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q -m gpu tests/test_skinny.py \
  -k pdl -p no:cacheprovider > $OUT/sanitizer_pdl.txt 2>&1
echo "compute-sanitizer memcheck (pdl tests) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_pdl.txt | tail -3
