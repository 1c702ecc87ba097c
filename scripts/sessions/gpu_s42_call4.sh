#!/usr/bin/env bash
# Session 42, call 4 (~5 min; GPU only; no carry). #17 with --in-process-tuning on Llama-1B decode b1
# (call 1's 200 s timeout cut it off after its tuning: 8.5 s against 143 s of max-autotune compile).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 420 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --in-process-tuning \
  --modes max_autotune_pdl_graph,fuse_patch_compile_pdl_graph --out $OUT/bm_inproc_llama-1b > $OUT/bm_inproc_llama-1b.log 2>&1
echo "bench-model --in-process-tuning llama-1b rc=$?"
grep -E "own tuning|first calls|interleaved" $OUT/bm_inproc_llama-1b/bench-model.md | cut -c1-400
