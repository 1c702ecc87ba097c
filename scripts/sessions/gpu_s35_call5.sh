#!/usr/bin/env bash
# Session 35 (~5 min; GPU only; no carry). The M=1 hand-back's new default (torch_ops: none in a
# graph with merged fused groups, all in one without) on the fused + patched Llama-1B decode b1:
# "default" (the variable unset) against 0 (hand back all, the old default), one process,
# interleaved. Also the second measurement of session 34's fused 1.183x (inf against 0).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 560 python3 scripts/exp_gemv_handback.py --thresholds default,0 --out $OUT/gemv_handback_fused.json \
  > $OUT/gemv_handback_fused.log 2>&1
echo "exp rc=$?"; grep -v "^E11\|^W11" $OUT/gemv_handback_fused.log | grep -E "threshold|interleaved|patch |rror" | tail -8
