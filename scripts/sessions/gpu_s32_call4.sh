#!/usr/bin/env bash
# Session 32, call 4: the GPU tests of the fuse modules and patched layers after the session's later
# changes, then the README's decode recipe as written (gpu_s32_call4.py). GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 90 python3 -m pytest -q -n 4 -p no:cacheprovider -m gpu tests/test_fuse_compile.py tests/test_fuse.py \
  tests/test_nn_transforms.py tests/test_padcache.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -6
timeout 230 python3 scripts/sessions/gpu_s32_call4.py > $OUT/recipe.log 2>&1
echo "recipe rc=$?"; grep -v "^W11\|^E11\|Warning\|warn" $OUT/recipe.log | tail -6
