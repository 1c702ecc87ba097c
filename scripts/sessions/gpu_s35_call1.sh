#!/usr/bin/env bash
# Prepared at the end of session 34 for session 35 (~7 min; GPU only; no carry).
# The M=1 hand-back on an UNFUSED patched model (Llama-1B decode b1, compile with coordinate
# descent, thresholds 0 = today's default and inf = none handed back, one process, interleaved).
# Session 34 measured the fused model: inf 1.183x the default. The default hand-back came from an
# unfused patched model on the H100 (2026-11-25: 0.921x without it). If inf wins here too, make it
# the default (torch_ops.gemv_handback_min_bytes) and say so in the README.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 560 python3 scripts/exp_gemv_handback.py --no-fuse --thresholds 0,inf --out $OUT/gemv_handback_unfused.json \
  > $OUT/gemv_handback_unfused.log 2>&1
echo "exp rc=$?"; grep -v "^E11\|^W11" $OUT/gemv_handback_unfused.log | grep -E "threshold|interleaved|patch |rror" | tail -8
