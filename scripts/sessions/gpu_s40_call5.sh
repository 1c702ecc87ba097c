#!/usr/bin/env bash
# Session 40, call 5 (~4-5 min; GPU only; no carry). Qwen2-0.5B decode b1 with the M = 1 -flat
# GEMV tiles (skinny_spec._DEFAULT_ONE_ROW) and their -pdl twins, against max-autotune + Inductor's
# PDL: scripts/exp_pdl_model.py as session 39's call 3 (then 1.408x; 0.924 against 1.302 ms), and
# the tuning time against max-autotune's compile of the step (then 11.2 against 85.8 s).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
timeout 500 python3 scripts/exp_pdl_model.py --model qwen2-0.5b --out $OUT/pdl_ma_qwen2.json --inductor-pdl --max-autotune \
  --only max_autotune+inductor_pdl,tuned,pdl+inductor_pdl > $OUT/pdl_ma_qwen2.log 2>&1
echo "exp_pdl_model qwen2 --max-autotune rc=$?"; grep -v "^E11\|^W11" $OUT/pdl_ma_qwen2.log | grep -E "fuse|first calls|interleaved|rror|tun" | tail -12
