#!/usr/bin/env bash
# Session 34, call 6 (~7 min; GPU only; no carry). Call 5 measured the M=1 hand-back rule inside one
# process: never handing a GEMV back (GEMMTUNE_GEMV_HANDBACK_MIN_BYTES=inf, gemmtune's skinny
# kernel in the graph) ran the fused decode step 1.183x faster than handing every one back. This is
# #17's direct comparison under that rule: Llama-1B decode b1, fused + patched + compile (cdt)
# against max-autotune, from CUDA graphs, interleaved, profiled.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
export GEMMTUNE_GEMV_HANDBACK_MIN_BYTES=inf
timeout 560 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
  --modes fuse_patch_compile_cdt_graph,max_autotune_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|profile" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
