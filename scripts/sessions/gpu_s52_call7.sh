#!/usr/bin/env bash
# Session 52, call 7 (GPU only; no carry; ~6 min): the final tree. The -m gpu lane (after the
# helpers' hunts of the step gate / capture / patch flow and of fuse_linears / the norm fold), then
# fuzz_patch seed 52 with --compile (random models through the gated patch(example_inputs=...),
# eager, loaded, from a CUDA graph and compiled, against fp64).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 300 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
LEFT=$(( 520 - $(date +%s) + T0 ))
timeout $LEFT python3 scripts/fuzz_patch.py --seed 52 --n 6 --compile --out $OUT > $OUT/fuzz.log 2>&1
echo "fuzz rc=$?"; tail -6 $OUT/fuzz.log
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
