#!/usr/bin/env bash
# Session 37, after call 5. The #17 comparison with PDL on both sides: Llama-1B decode b1, the
# fused + tuned model with its -pdl twins (gemmtune.patch(pdl=True)'s serving) under default
# compile with Inductor's PDL on, against the unpatched model under max-autotune with Inductor's
# PDL on too; the tuned winners without PDL as the base. CUDA graphs, interleaved. max-autotune
# runs first (~6 min) and the JSON is written after each variant.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
timeout 585 python3 scripts/exp_pdl_model.py --out $OUT/pdl_ma.json --inductor-pdl --max-autotune \
  --only max_autotune+inductor_pdl,tuned,pdl+inductor_pdl > $OUT/pdl_ma.log 2>&1
echo "exp_pdl_model --max-autotune rc=$?"; grep -v "^E11\|^W11" $OUT/pdl_ma.log | grep -E "fuse|first calls|interleaved|rror" | tail -10
