#!/usr/bin/env bash
# Session 31, call 4: the fuse tests again (the GPU CUDA-graph test's model fixed), then the fused
# modes on a 7B model, Mistral-7B's default config (hf:mistral): decode b1 and b16, un-graphed
# (eager against fused + patched, paired rounds) and from CUDA graphs. GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_fuse.py tests/test_capture.py -k "fuse" > $OUT/fuse_tests.txt 2>&1
echo "fuse tests rc=$?"; tail -3 $OUT/fuse_tests.txt
timeout 330 python3 -m gemmtune.cli bench-model --models hf:mistral --phases decode_b1,decode_b16 \
  --modes eager,eager_fuse_patch,eager_graph,eager_patch_graph,eager_fuse_graph,eager_fuse_patch_graph \
  --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|Fused|FAIL|paths" | tail -12
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
