#!/usr/bin/env bash
# Prepared at the end of session 33 for session 34 (call 4, ~5 min; GPU only; no carry).
# #17's "eager + patch never slower than eager", un-graphed, with 201 interleaved rounds
#    (--eager-rounds, new) instead of 21: the paired median's 95% CI (new) at 21 rounds is the
#    quartile range (the 6th to 16th ratio), 0.937-1.026 for eager against itself at b16 in
#    session 32, wider than the differences in question (fused + patched 0.963x there). ~80 s of
#    rounds per phase.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 540 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1,decode_b16 --eager-rounds 201 \
  --modes eager,eager_patch,eager_fuse_patch --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL" | tail -12
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
