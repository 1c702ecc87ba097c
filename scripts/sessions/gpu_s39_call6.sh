#!/usr/bin/env bash
# Session 39 (~4 min; GPU only): is the GEMV strip's design what holds it at 78% of the floor on
# wide decode GEMVs? scripts/exp_gemv_kernel.py: skinny's design (the [BN, BK] product kept over K)
# against the product reduced at every K step (fewer registers, more programs an SM) and a
# persistent grid (no tail wave), with skinny's default strips and cuBLAS, 12 decode GEMVs.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 330 python3 scripts/exp_gemv_kernel.py --out $OUT/gemv_kernel.json --budget-s 260 > $OUT/gemv_kernel.log 2>&1
echo "exp_gemv_kernel rc=$?"; tail -14 $OUT/gemv_kernel.log
