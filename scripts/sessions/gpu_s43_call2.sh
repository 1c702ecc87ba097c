#!/usr/bin/env bash
# Prepared in session 42 for session 43 (~4 min; GPU only; no carry). #19's one-shape runs as a
# returning user meets them: the bytecode cache warm (one small tune first) and, with
# SHARED_CACHES=1, one Triton / Inductor cache a side across the shapes (empty at the start: a
# shape may load kernels compiled for the shapes before it, never its own). Session 42 measured the
# fully cold case: 0.28x and 0.50x max-autotune (benchmarks/results/2026-11-30-h200-s42, call 3).
# At most 8 files come back from $OUT: the single/ folder is tarred.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
python3 -m gemmtune_entry tune --shape 64x256x256:bf16 --fast --store /tmp/warm.sqlite --out /tmp/warm.json 2>&1 | tail -1
SHAPES="2048x6144x4096:bf16 512x4096x4096:bf16 16x6144x4096:bf16 1000x1000x1000:bf16 64x64x65536:bf16"
OUT=/tmp/single_cold SHAPES="$SHAPES" timeout 260 bash scripts/single_shape_fast.sh 2>&1 | tail -7
OUT=/tmp/single_shared SHARED_CACHES=1 SHAPES="$SHAPES" timeout 260 bash scripts/single_shape_fast.sh 2>&1 | tail -7
tar czf $OUT/single.tgz -C /tmp single_cold single_shared
