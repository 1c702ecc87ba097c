#!/usr/bin/env bash
# Session 43, call 6 (GPU only; no carry; ~6.5 min):
# 1. the GPU model zoo again, its mixture-of-experts bound fixed (call 5: mixtral's bf16 routing);
# 2. a model no session has run: Qwen3-0.6B's sizes (benchmarks/models-s43/qwen3-0.6b.json, random
#    weights, bf16), decode b1, fused + patched + compiled with PDL against max-autotune with PDL,
#    profiled. The bytecode cache is warmed first, as in the earlier model runs.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 150 python3 -m pytest -q -n 8 tests/test_model_zoo_gpu.py -p no:cacheprovider > $OUT/zoo_gpu.txt 2>&1
echo "zoo rc=$?"; tail -3 $OUT/zoo_gpu.txt
python3 -m gemmtune_entry tune --shape 64x256x256:bf16 --fast --store /tmp/warm.sqlite --out /tmp/warm.json 2>&1 | tail -1
timeout 340 python3 -m gemmtune.cli bench-model --models config:benchmarks/models-s43/qwen3-0.6b.json --phases decode_b1 \
  --profile --modes fuse_patch_compile_pdl_graph,max_autotune_pdl_graph --out /tmp/bm_qwen3 > /tmp/bm_qwen3.log 2>&1
echo "bench-model rc=$?"; grep -E "own tuning|interleaved|\| fuse_patch|\| max_autotune|first calls" /tmp/bm_qwen3/bench-model.md | cut -c1-400
rm -f /tmp/bm_qwen3/*.png; tar czf $OUT/bm_qwen3.tgz -C /tmp bm_qwen3 bm_qwen3.log
