#!/usr/bin/env bash
# Session 39 (~1.5 min; GPU only). Call 7 measured skinny's strip with a 2-D one-row path: slower
# on 6 of 12 decode GEMVs, so it was reverted. Calls 6-7 also showed the script kernels' best
# tiles are 2-warp ones that neither skinny's default space nor exp_gemv_wide's sweep had
# (prod-BN4-BK1024-W2 17.7 us on 1 x 16384 x 2048, against 19.7 for skinny's best). This sweep
# adds 2 warps (BN2-BK2048, BN4-BK1024, BN8-BK512) on skinny's own kernel.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 150 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_w2.json --budget-s 120 > $OUT/gemv_wide_w2.log 2>&1
echo "exp_gemv_wide rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide_w2.log | tail -13
