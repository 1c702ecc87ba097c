#!/usr/bin/env bash
# Prepared at the end of session 36 for session 37 (~9 min; GPU only; no carry). Optional, after
# call 3 shows a gain: the #17 comparison side by side in one process. Llama-1B decode b1, the
# fused + tuned model with its winners and with their -pdl twins (default compile), against the
# unpatched model under max-autotune (whose compile takes ~6 min), CUDA graphs, interleaved.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
timeout 580 python3 scripts/exp_pdl_model.py --out $OUT/pdl_model_ma.json --max-autotune > $OUT/pdl_model_ma.log 2>&1
echo "exp_pdl_model --max-autotune rc=$?"; grep -v "^E11\|^W11" $OUT/pdl_model_ma.log | grep -E "fuse|first calls|interleaved|rror" | tail -10
