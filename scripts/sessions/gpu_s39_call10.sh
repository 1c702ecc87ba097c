#!/usr/bin/env bash
# Session 39 (~1.5 min; GPU only; the last of the session's device time). skinny's M = 1 2-D path
# again (the 3-D product's A broadcast is a shared-memory layout conversion with 4-10 barriers
# inside the K loop, in SASS compiled offline; the 2-D path has none there), now with the
# default space's GEMV strips that a plain 2-D kernel won with (calls 6-7: BN4-BK1024-W2 and
# others). exp_gemv_wide: the default space's best strip against cuBLAS on 12 decode GEMVs.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 110 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_2d_defaults.json --budget-s 90 > $OUT/gemv_wide_2d_defaults.log 2>&1
echo "exp_gemv_wide rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide_2d_defaults.log | sed -E 's/ \| next:.*//' | tail -13
