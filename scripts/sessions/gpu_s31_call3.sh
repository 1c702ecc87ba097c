#!/usr/bin/env bash
# Session 31, call 3: gemmtune.fuse_linears on the GPU. Its tests (the CUDA-graph capture case is
# GPU-only), then bench-model with the sibling layers (q/k/v, gate/up) fused: Llama-1B decode b1,
# decode b16 and prefill 512, eager / patched / fused / fused + patched, un-graphed (paired rounds
# against eager) and from CUDA graphs (interleaved replays); then Qwen2-0.5B and Phi decode b1
# from graphs only. GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_fuse.py > $OUT/fuse_tests.txt 2>&1
echo "fuse tests rc=$?"; tail -3 $OUT/fuse_tests.txt
timeout 300 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1,decode_b16,prefill_b1_s512 \
  --modes eager,eager_patch,eager_fuse,eager_fuse_patch,eager_graph,eager_patch_graph,eager_fuse_graph,eager_fuse_patch_graph \
  --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|tuned|Fused|Checks|Warn|FAIL" | tail -20
timeout 200 python3 -m gemmtune.cli bench-model --models qwen2-0.5b,hf:phi --phases decode_b1 \
  --modes eager_graph,eager_patch_graph,eager_fuse_graph,eager_fuse_patch_graph --out $OUT/bm2 > $OUT/bm2.log 2>&1
echo "bench-model 2 rc=$?"; grep -v "^E11\|^W11" $OUT/bm2.log | grep -E "interleaved|rror|FAIL" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm bm2 && rm -rf $OUT/bm $OUT/bm2
