#!/usr/bin/env bash
# Session 59, call 5 (GPU only; no carry; ~4 min): #17 with the fix. A patched layer now tests its hot shape (the last
# shape put on F.linear for good, held in its own __dict__) before its path table (nn._hot; call 4: the per-layer
# table read cost +149 us a step, an attribute compare +18 to +31). 1. Paired decode steps: plain, patched (the new
# forward), the floor, memo_check_in (the old forward's path, as a subclass) and a second floor copy. 2. The -m gpu
# tests of the files the change touches.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 200 python3 scripts/sessions/exp_forward_ladder.py --device cuda --dtype bfloat16 --features 2048 --steps 800 \
  --variants floor,memo_check_in,floor_b > $OUT/ladder.log 2>&1; echo "ladder rc=$?"; grep -v Warn $OUT/ladder.log | tail -8
timeout 170 python3 -m pytest -q -n 8 -m gpu tests/test_eager_gate.py tests/test_eager.py tests/test_nn_hot_shape.py \
  tests/test_nn_host_path.py tests/test_nn_reshape.py tests/test_nn_transforms.py tests/test_capture.py -p no:cacheprovider \
  > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
echo "call took $(( $(date +%s) - T0 )) s"
