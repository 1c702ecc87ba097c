#!/usr/bin/env bash
# Session 42, call 4 (~5 min; GPU only; no carry). #17 on Llama-1B decode b1 with the default tuning
# (a subprocess worker), gemmtune's bytecode cache warmed first by one small tune on this machine,
# as call 3's one-shape runs warmed it before its Qwen2-0.5B run (9.5 s of tuning, 2.3 s of it
# the worker's start-up, against 110.9 s of max-autotune compile).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
python3 -m gemmtune_entry tune --shape 64x256x256:bf16 --fast --store /tmp/warm.sqlite --out /tmp/warm.json 2>&1 | tail -1
timeout 420 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 \
  --modes max_autotune_pdl_graph,fuse_patch_compile_pdl_graph --out $OUT/bm_llama-1b > /tmp/bm.log 2>&1
echo "bench-model llama-1b rc=$?"; tail -c 3000 /tmp/bm.log > $OUT/bm_llama-1b.log_tail
grep -E "own tuning|first calls|interleaved" $OUT/bm_llama-1b/bench-model.md | cut -c1-400
