#!/usr/bin/env bash
# Session 58, call 4 (GPU only; no carry; ~3.5 min): 1. #17: where a patched Llama decode step's +0.7% (call 3, 600
# paired steps) is: plain, patched, patched with every converted layer's forward cut to F.linear, and plain with its
# layers only re-classed, single steps in rotating order (diag_linear_host.py --paired-steps). 2. The -m gpu tests of the
# measuring code and the GPU suite (the whole lane no longer fit the device time left) with the benchmark-operand fix (make_operand keeps torch.randn's pointer where the strides are unaligned).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 100 python3 scripts/diag_linear_host.py --device cuda --dtype bfloat16 --features 2048 --rounds 2 --no-layers \
  --paired-steps 500 > $OUT/llama_variants.log 2>&1; echo "llama rc=$?"; grep -v Warn $OUT/llama_variants.log | tail -6
timeout 120 python3 -m pytest -q -n 8 -m gpu tests/test_measure.py tests/test_unaligned_operands.py tests/test_bench.py tests/test_gpu.py -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15; gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
