#!/usr/bin/env bash
# Session 28 (prepared; the session had 79 s of device time, so it did not run): the first call of
# the next session. Checks on a GPU what session 28 changed on the CPU:
# - every GPU-marked test (test_gpu's two literal dispatcher cache keys changed: devices, is_neg);
# - memcheck on the split-K workspace tests (a second capture before any warm-up now zeroes the
#   borrowed buffer in its own graph);
# - the dispatcher's eager per-call cost (its cache key grew by the operands' devices and is_neg())
#   beside torch.mm, and bench-model's un-graphed decode (patched forwards' cheaper autocast check).
# GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
# Session 28's new CPU tests, on the GPU (they take CUDA tensors there): torch.compile of a dispatcher,
# of gemmtune.matmul and of route_bmm; stride-0 operands refused by persistent_tma; negated views.
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_dispatch.py tests/test_autograd.py tests/test_bmm.py \
  tests/test_persistent.py tests/test_errors.py -k "compile or stride_0 or negated or empty_batch or fp32_output" \
  > $OUT/s28_tests.txt 2>&1
echo "s28 tests rc=$?"; grep -E "FAILED|passed|failed" $OUT/s28_tests.txt | tail -6
timeout 120 compute-sanitizer --tool memcheck python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py \
  -k "workspace or concurrent_streams" > $OUT/memcheck.txt 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.txt | tail -4
timeout 120 python3 scripts/bench_dispatch.py --sections overhead --out $OUT > $OUT/overhead.log 2>&1
echo "overhead rc=$?"; tail -15 $OUT/overhead.log
timeout 200 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 \
  --modes eager,eager_patch,eager_graph,eager_patch_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "interleaved|×|rror|tuned|decode" | tail -20
