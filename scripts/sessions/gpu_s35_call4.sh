#!/usr/bin/env bash
# Prepared at the end of session 34 for session 35 (~5 min; GPU only; no carry).
# Every GPU-marked test after session 34's changes (fuse load_state_dict re-fusing once, the
# interpreter lock in gemmtune.matmul, dispatcher files checked at load, eager_copy).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 420 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
