#!/usr/bin/env bash
# Session 51, call 4 (GPU only; no carry; ~8 min): the final tree. The -m gpu lane (the step gate
# and decode_step with the real timer; the hunt's fp8 BLOCK_K, strided-key and scaled_mm table
# fixes), then fuzz_patch seed 51 with --compile (random models through patch(example_inputs=...),
# now gated, eager and compiled against fp64).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 300 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
LEFT=$(( 560 - $(date +%s) + T0 ))
timeout $LEFT python3 scripts/fuzz_patch.py --seed 51 --n 6 --compile --out $OUT > $OUT/fuzz.log 2>&1
echo "fuzz rc=$?"; tail -6 $OUT/fuzz.log
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
