#!/usr/bin/env bash
# Prepared at the end of session 36 for session 37 (~7 min; GPU only; no carry). Run FIRST.
# 1. Every GPU-marked test after session 36's changes. New ones: the -pdl GEMV strips
#    (tests/test_skinny.py: a CUDA-graph chain whose GEMVs read the kernel before's output; the
#    prepared launch; a dispatcher of a -pdl choice).
# 2. compute-sanitizer (memcheck) over those -pdl tests: the kernel loads its first weight tile
#    before gdc_wait.
# 3. scripts/exp_pdl.py at the two best strips of session 36 (1.24x cuBLAS on the chain), with
#    --single: skinny's default GEMV strips and their -pdl twins timed the tuner's way, per decode layer.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q -m gpu tests/test_skinny.py \
  -k pdl -p no:cacheprovider > $OUT/sanitizer_pdl.txt 2>&1
echo "compute-sanitizer memcheck (pdl tests) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_pdl.txt | tail -3
for cfg in "4 2048" "2 2048"; do set -- $cfg
  timeout 90 python3 scripts/exp_pdl.py $OUT/pdl_bn$1_bk$2 --bn $1 --bk $2 $([ "$1" = 4 ] && echo --single) 2>&1 | tail -12
done
