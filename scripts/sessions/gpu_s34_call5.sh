#!/usr/bin/env bash
# Prepared at the end of session 33 (call 5, ~8 min; GPU only; no carry): keep the small M=1
# GEMMs on gemmtune's tuned kernels instead of handing every one back to Inductor?
# scripts/exp_gemv_handback.py: Llama-1B decode b1 fused + patched + compile (coordinate descent)
# under GEMMTUNE_GEMV_HANDBACK_MIN_BYTES = 0 (today), 16 MiB (q+k+v and o kept), inf (none handed
# back); CUDA graphs, logits against the unfused eager model, kernel profiles, interleaved replays.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 580 python3 scripts/exp_gemv_handback.py --out $OUT/gemv_handback.json > $OUT/gemv_handback.log 2>&1
echo "exp rc=$?"; grep -v "^E11\|^W11" $OUT/gemv_handback.log | grep -E "threshold|interleaved|fuse \+|rror" | tail -8
