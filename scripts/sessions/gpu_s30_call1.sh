#!/usr/bin/env bash
# Session 30 had no device time (188 s left of the budget, no machine to start). Its CPU-side
# changes, and session 29's last two (content-digest handles b02e458, review 7187081), on the GPU:
# - every GPU-marked test (new: test_rebinding_data_on_a_gpu_is_not_served_the_old_copy, the
#   padcache's storage weak reference under the caching allocator, and test_dispatch_views on CUDA:
#   cached prepared launches met with other operand layouts), then the compile tests on CUDA
#   tensors (the patched Linear's _tuned now has a try/except that dynamo traces);
# - scripts/diag_eager_host.py on Llama-1B decode b1 with the new "patch_aten" variant: the patched
#   model with every path forced to F.linear, which splits the un-graphed 3-6% loss into the
#   forwards' own Python (copy vs patch_aten) and the tuned layers (patch_aten vs patch).
# GPU only; no carry needed (the shipped ranker runs through numpy without lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 300 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 150 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_dispatch.py tests/test_autograd.py tests/test_bmm.py \
  tests/test_eager.py tests/test_padcache.py -k "compile or remembered or disk_caches or rebinding" \
  > $OUT/compile_tests.txt 2>&1
echo "compile tests rc=$?"; grep -E "FAILED|passed|failed" $OUT/compile_tests.txt | tail -6
timeout 200 python3 scripts/diag_eager_host.py --model llama-1b --out $OUT/diag > $OUT/diag.log 2>&1
echo "diag rc=$?"; grep -E "remembered|median|over" $OUT/diag.log | head -40
