#!/usr/bin/env bash
# Prepared at the end of session 34 for session 35 (~4 min; GPU only; no carry).
# #17 "eager + patch never slower": session 34 measured 0.958x (95% CI 0.954-0.963) at decode b1,
# and found the patched layers' own host cost to be ~0.4% of the step. eager_copy (a deep copy run
# as it is) is the control: the patched and fused modes are deep copies too.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 540 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1,decode_b16 --eager-rounds 201 \
  --modes eager,eager_copy,eager_patch,eager_fuse_patch --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL" | tail -12
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
