#!/usr/bin/env bash
# Session 42, call 5 (~3 min; GPU only; no carry). Where the best Llama-1B decode step's time goes
# now (fused + patched + compiled, PDL, CUDA graph): bench-model --profile of that one mode, to size
# the norm fold (an RMSNorm folded into the GEMV after it; 1.19x on a norm -> GEMV chain in session
# 39's exp_pdl.py) against the step's other kernels before building it.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
python3 -m gemmtune_entry tune --shape 64x256x256:bf16 --fast --store /tmp/warm.sqlite --out /tmp/warm.json 2>&1 | tail -1
timeout 300 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
  --modes fuse_patch_compile_pdl_graph --out $OUT/bm_prof_llama-1b > /tmp/bm.log 2>&1
echo "bench-model --profile llama-1b rc=$?"; tail -c 3000 /tmp/bm.log > $OUT/bm_prof_llama-1b.log_tail
grep -iE "profile|kernel|µs" $OUT/bm_prof_llama-1b/bench-model.md | cut -c1-300 | head -40
