#!/usr/bin/env bash
# Session 29, call 3: this session's CPU-side changes on the GPU.
# - every GPU-marked test, then the compile tests on CUDA tensors (call 1 found a Dispatcher under
#   torch.compile raising InternalTorchDynamoError on torch 2.11; fixed, with random dispatcher handles);
# - eager against eager + patch, un-graphed, with the forwards' new shape-first path lookup and the
#   paired-round verdict (21 interleaved rounds of ~100 ms): Llama-3.2-1B and StarCoder2 configs, decode b1.
# GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
timeout 230 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 150 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_dispatch.py tests/test_autograd.py tests/test_bmm.py \
  tests/test_eager.py -k "compile or remembered or disk_caches" > $OUT/compile_tests.txt 2>&1
echo "compile tests rc=$?"; grep -E "FAILED|passed|failed" $OUT/compile_tests.txt | tail -6
timeout 200 python3 -m gemmtune.cli bench-model --models llama-1b,hf:starcoder2 --phases decode_b1 \
  --modes eager,eager_patch --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "interleaved|rror|paths|decode" | tail -12
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
