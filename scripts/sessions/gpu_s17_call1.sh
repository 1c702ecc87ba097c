#!/usr/bin/env bash
# Session 17, call 1: which M=1 GEMVs to hand back to Inductor under coordinate-descent tuning
# (scripts/exp_gemv_keep.py), Llama-1B sizes with LAYERS layers. GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
LAYERS=${LAYERS:-4} timeout ${EXP_S:-540} python3 scripts/exp_gemv_keep.py $OUT/gemv-keep > $OUT/exp.log 2>&1
echo "exp rc=$?"; grep -v "^  " $OUT/exp.log | tail -40
