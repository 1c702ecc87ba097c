#!/usr/bin/env bash
# Prepared at the end of session 34 for session 35 (~7 min; GPU only; no carry).
# #17 on a second model: Qwen2-0.5B decode b1, fused + patched + compile (cdt) against
# max-autotune, profiled; with no M=1 hand-back (session 34's best for the fused recipe).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
export GEMMTUNE_GEMV_HANDBACK_MIN_BYTES=inf
timeout 560 python3 -m gemmtune.cli bench-model --models qwen2-0.5b --phases decode_b1 --profile \
  --modes fuse_patch_compile_cdt_graph,max_autotune_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|profile" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
