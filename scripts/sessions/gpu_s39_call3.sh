#!/usr/bin/env bash
# Prepared at the end of session 38 for session 39 (~9 min; GPU only; no carry).
# #17 with PDL on both sides on the second model: Qwen2-0.5B decode b1 (session 37 measured only
# Llama-1B: 1.051x max-autotune + Inductor PDL). scripts/exp_pdl_model.py as session 37's call 6:
# max-autotune + Inductor PDL first (its JSON written before the others), then the tuned step
# and its -pdl twins with Inductor's PDL, CUDA graphs, interleaved.
# (bench-model cannot fit this in one call: session 38's call 4 ran out of its 560 s in
# max-autotune's compile of the prompt pass after two other graph modes.)
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
timeout 585 python3 scripts/exp_pdl_model.py --model qwen2-0.5b --out $OUT/pdl_ma_qwen2.json --inductor-pdl --max-autotune \
  --only max_autotune+inductor_pdl,tuned,pdl+inductor_pdl > $OUT/pdl_ma_qwen2.log 2>&1
echo "exp_pdl_model qwen2 --max-autotune rc=$?"; grep -v "^E11\|^W11" $OUT/pdl_ma_qwen2.log | grep -E "fuse|first calls|interleaved|rror" | tail -10
