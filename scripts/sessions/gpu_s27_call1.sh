#!/usr/bin/env bash
# Session 27, call 1: split-K/skinny scratch per stream, kept when it grows (kernels.splitk.SplitKWorkspace).
# Every GPU-marked test (the new graph-replay-after-growth and two-stream tests among them), memcheck
# on those two, then gemmtune bench-model on Llama-3.2-1B and Qwen2-0.5B configs at decode, eager
# and eager + patch both un-graphed (host-bound, as a plain loop runs) and from CUDA graphs.
# GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 120 compute-sanitizer --tool memcheck python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py \
  -k "workspace_grew or concurrent_streams" > $OUT/memcheck.txt 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.txt | tail -4
timeout 330 python3 -m gemmtune.cli bench-model --models llama-1b,qwen2-0.5b --phases decode_b1,decode_b16 \
  --modes eager,eager_patch,eager_graph,eager_patch_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "interleaved|×|rror|tuned|decode" | tail -30
ls $OUT/bm
