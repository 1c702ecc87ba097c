#!/usr/bin/env bash
# Session 23, call 4: every GPU-marked test on the final tree, then the public suite's prefill and
# square groups with Inductor max-autotune, now timed with its output held for a pass over the
# input sets (bench.inductor.held_launch) and each gemmtune mode's eager time through a dispatcher
# (bench.eager). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
mkdir -p $OUT/tests
timeout 200 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/tests/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -2 $OUT/tests/gpu_tests.txt
tar czf $OUT/tests.tgz -C $OUT tests && rm -rf $OUT/tests
BENCH_GROUPS=prefill,square BENCH_S=340 DEADLINE_S=290 bash scripts/gpu_s15_suite.sh
