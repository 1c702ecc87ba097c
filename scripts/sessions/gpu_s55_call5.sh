#!/usr/bin/env bash
# Session 55, call 5 (GPU only; no carry; ~4 min): the -m gpu lane once more, after the tuning-loop hunt
# (the worker pool now skips what a worker prints before it is ready) and the config-space hunt (fp8
# refused below sm_89, skinny's tl.dot accumulators capped) were merged.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 280 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
