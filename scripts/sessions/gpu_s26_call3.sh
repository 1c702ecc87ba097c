#!/usr/bin/env bash
# Session 26, call 3: the mid-size decode shapes again with a wider skinny sweep
# (exp_mid_decode.py --wide: narrow CUDA-core strips, BLOCK_N 16 dot tiles, 2-8 warps, both
# reductions). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 540 python3 scripts/exp_mid_decode.py --wide --out $OUT > $OUT/mid.log 2>&1
echo "exp rc=$?"; grep -v "^#" $OUT/mid.log | cut -c1-330 | tail -14; grep "^#" $OUT/mid.log
