#!/usr/bin/env bash
# Device call 3 of 2026-11-24 (session 3): #17 max-autotune on Llama-3.2-1B decode (b1) alone,
# for its compile time and step time (earlier runs never reached it within a call's limit).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=$OUT MODELS=llama-1b PHASES=decode_b1 MODES=${MODES:-max_autotune} \
  timeout ${LLAMA_S:-540} bash scripts/gpu_bench_model.sh 2>&1 | grep -v "^E1124\|^W1124\|Traceback\|^  File\|^    " | tail -30
rm -f $OUT/bench-model.md $OUT/*.png
