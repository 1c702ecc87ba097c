#!/usr/bin/env bash
# Session 22, call 2 (H200): every GPU-marked test, then the public suite's prefill and square groups
# with Inductor max-autotune (scripts/gpu_s15_suite.sh). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
mkdir -p $OUT/tests
timeout 200 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/tests/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -2 $OUT/tests/gpu_tests.txt
tar czf $OUT/tests.tgz -C $OUT tests && rm -rf $OUT/tests
BENCH_GROUPS=prefill,square BENCH_S=330 DEADLINE_S=280 bash scripts/gpu_s15_suite.sh
