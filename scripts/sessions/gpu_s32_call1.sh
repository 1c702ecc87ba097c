#!/usr/bin/env bash
# Prepared at the end of session 31 for the next session's first device call: what landed after
# session 31's last GPU call, on the GPU.
# - every GPU-marked test (new or changed since: the fuse round checks, patched layers under
#   forward-mode AD / torch.func on CUDA tensors, the padcache optimizer-step hook, persistence
#   and report fixes), then tests/test_fuse*.py and tests/test_nn_transforms.py on the GPU machine
#   (CPU tensors there: these need TRITON_INTERPRET=1 like the CI);
# - bench-model's fused modes on Llama-1B again (the un-graphed figures of session 31 were taken
#   before the round checks, ~1 us a round more on the CPU), with the new A/A control.
# GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 300 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
TRITON_INTERPRET=1 timeout 150 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_fuse.py tests/test_fuse_rounds.py \
  tests/test_nn_transforms.py tests/test_padcache.py > $OUT/cpu_lane.txt 2>&1
echo "cpu-lane tests rc=$?"; grep -E "FAILED|passed|failed" $OUT/cpu_lane.txt | tail -6
timeout 240 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1,decode_b16 \
  --modes eager,eager_patch,eager_fuse_patch,eager_graph,eager_patch_graph,eager_fuse_patch_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL" | tail -12
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
