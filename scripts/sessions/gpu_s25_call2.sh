#!/usr/bin/env bash
# Session 25, call 2 (2 GPUs): every GPU-marked test on the tree with kernels.run_choice's device
# switch (the 2-GPU dispatcher and scaled_mm tests among them), then a Llama-style model split
# over both GPUs, patched with gemmtune and checked against itself (scripts/multi_gpu_model.py).
# GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm transformers accelerate
timeout 280 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -12
grep -E "operands_gpu|scaled_mm_runs_on" $OUT/gpu_tests.txt | head
timeout 300 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_scaled_mm.py tests/test_pad.py -k "operands_gpu or runs_on_the_operands or another_gpu" -rA -p no:cacheprovider 2>&1 | grep -E "PASSED|FAILED|SKIPPED|passed|failed" | tail -12
timeout 240 python3 scripts/multi_gpu_model.py $OUT/multi_gpu_model.json > $OUT/multi_gpu_model.log 2>&1
echo "multi-gpu model rc=$?"; tail -40 $OUT/multi_gpu_model.log
