#!/usr/bin/env bash
# Device call 7 of 2026-11-24: bench-model with every mode, max-autotune included (its compile time
# against gemmtune's tuning time): Llama-3.2-1B, then Qwen2-0.5B; decode b1 and prefill 1x512.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
mkdir -p $OUT/llama $OUT/qwen
OUT=$OUT/llama MODELS=llama-1b PHASES=decode_b1,prefill_b1_s512 MODES=eager,eager_patch,patch_compile,compile,max_autotune \
  timeout ${LLAMA_S:-330} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "llama rc=$?"; grep -E "^llama|rror" $OUT/llama/bench-model.log | tail -20
OUT=$OUT/qwen MODELS=qwen2-0.5b PHASES=decode_b1,prefill_b1_s512 MODES=eager,eager_patch,patch_compile,compile,max_autotune \
  timeout ${QWEN_S:-230} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "qwen rc=$?"; grep -E "^qwen|rror" $OUT/qwen/bench-model.log | tail -20
rm -f $OUT/llama/bench-model.md $OUT/qwen/bench-model.md
