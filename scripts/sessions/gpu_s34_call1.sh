#!/usr/bin/env bash
# Prepared at the end of session 33 for session 34's first device call (~7 min; GPU only; no carry).
# 1. Every GPU-marked test: session 33 changed the padded-weight cache (a token on the parameter
#    and a weak reference to the storage instead of one to the parameter: swap_tensors works) and
#    more (see git log after 560b821).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 420 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
# 2. The padded-weight cache's tests on CUDA tensors (real kernels: DEV is cuda without the
#    interpreter), then the CPU-lane tests of session 33's fixes with the interpreter, as CI runs them.
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_padcache.py > $OUT/padcache_cuda.txt 2>&1
echo "padcache on CUDA rc=$?"; tail -2 $OUT/padcache_cuda.txt
TRITON_INTERPRET=1 timeout 150 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_nn_transforms.py \
  tests/test_fuse.py tests/test_fuse_rounds.py tests/test_fuse_compile.py > $OUT/cpu_lane.txt 2>&1
echo "cpu-lane tests rc=$?"; grep -E "FAILED|passed|failed" $OUT/cpu_lane.txt | tail -6
