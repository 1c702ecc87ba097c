#!/usr/bin/env bash
# Session 19, call 5: every GPU-marked test on the final tree (the helper's capture/patch changes,
# the retrained H100 ranker), then the public decode, splitk and odd groups through
# scripts/gpu_s15_suite.sh (Inductor max-autotune included, TunableOp skipped). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
timeout ${TESTS_S:-240} python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider --durations=8 > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -8
BENCH_GROUPS=decode,splitk,odd BENCH_S=${BENCH_S:-330} DEADLINE_S=${DEADLINE_S:-290} bash scripts/gpu_s15_suite.sh
