#!/usr/bin/env bash
# Device call 5 of 2026-11-24: bench-model after the compile-time cuBLAS shortcut: Llama-3.2-1B and
# GPT-2, eager / eager+patch / compile / patch+compile, decode b1 and prefill 1x512.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
nproc; uptime
mkdir -p $OUT/llama $OUT/small
OUT=$OUT/llama MODELS=llama-1b PHASES=decode_b1,prefill_b1_s512 MODES=eager,eager_patch,compile,patch_compile \
  timeout ${LLAMA_S:-260} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "llama rc=$?"; grep -E "^llama |rror" $OUT/llama/bench-model.log | tail -20
OUT=$OUT/small MODELS=gpt2 PHASES=decode_b1,prefill_b1_s512 MODES=eager,eager_patch,compile,patch_compile \
  timeout ${SMALL_S:-160} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "gpt2 rc=$?"; grep -E "^gpt2 |rror" $OUT/small/bench-model.log | tail -20
rm -f $OUT/small/bench-model.md $OUT/llama/bench-model.md
