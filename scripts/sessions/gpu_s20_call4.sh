#!/usr/bin/env bash
# Session 20, call 4, the final tree (the H100 ranker retrained on the fp32 collection, the
# one-launch pad pair): every GPU-marked test and the pad tests on CUDA, then the public suite's
# prefill and square groups (scripts/gpu_s15_suite.sh, Inductor included). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
mkdir -p $OUT/tests
timeout 200 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/tests/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -2 $OUT/tests/gpu_tests.txt
timeout 90 python3 -m pytest -q tests/test_pad.py tests/test_padcache.py -p no:cacheprovider > $OUT/tests/pad_tests.txt 2>&1
echo "pad tests rc=$?"; tail -2 $OUT/tests/pad_tests.txt
tar czf $OUT/tests.tgz -C $OUT tests && rm -rf $OUT/tests
BENCH_GROUPS=prefill,square BENCH_S=300 DEADLINE_S=250 bash scripts/gpu_s15_suite.sh
