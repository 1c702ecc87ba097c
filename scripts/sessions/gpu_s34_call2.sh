#!/usr/bin/env bash
# Prepared at the end of session 33 (call 2, ~7 min; GPU only; no carry): fused groups under
# torch.compile on a second architecture. Qwen2-0.5B config (24 layers, q/k/v with biases: the
# fused group carries one concatenated bias) at decode b1, fused + patched + compile with
# coordinate descent against max-autotune, from CUDA graphs, interleaved, both profiled. On the
# H100 (2026-11-26, unfused) patch + compile with coordinate descent measured 1.167x there.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 560 python3 -m gemmtune.cli bench-model --models qwen2-0.5b --phases decode_b1 --profile \
  --modes fuse_patch_compile_cdt_graph,max_autotune_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|profile" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
