#!/usr/bin/env bash
# Prepared at the end of session 35 for session 36 (~5 min; GPU only; no carry). Run FIRST.
# 1. Every GPU-marked test after session 35's changes (the per-graph M=1 hand-back default, the
#    patched layer's F.linear path reading _parameters, the helpers' fixes).
# 2. #17 "eager + patch never slower": session 35 measured patched 0.983x a deep copy (95% CI
#    0.979-0.989) at Llama-1B decode b1, ~1.6 us a patched layer call. The cached F.linear path
#    now reads its tensors from _parameters (CPU: -0.52 us a call against nn.Linear, was +0.30).
#    eager_fuse_patch (0.959x the copy in s35) is profiled per call: kernel counts against eager.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
# --profile: each eager mode's kernels per call too (does the fused model launch extra copies?)
timeout 320 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1,decode_b16 --eager-rounds 201 \
  --modes eager,eager_copy,eager_patch,eager_fuse_patch --profile --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|profile" | tail -14
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
