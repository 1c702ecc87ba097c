#!/usr/bin/env bash
# Session 31, call 7: is torch.compile still needed at decode once the sibling layers are fused
# and patched? Llama-1B decode b1 from CUDA graphs: eager, eager fused + patched, and the default
# compile with coordinate-descent tuning (compile_cdt: within 3% of max-autotune on this step in
# session 9, at a third of its compile time), interleaved replays. GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 280 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 \
  --modes eager_graph,eager_fuse_patch_graph,compile_cdt_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|first calls" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
