#!/usr/bin/env bash
# Session 18, call 2: every GPU-marked test (the split epilogue's among them), then `gemmtune bench`
# on benchmarks/suites/edge-s18.csv: 15 edge shapes nobody tuned for (1x1x1, N = 1, K = 1, K = 8,
# K = 1,000,003, column-major A, primes, fp32, an odd bmm, an odd-N addmm), every output checked
# against fp64, cuBLAS interleaved. GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout ${TESTS_S:-240} python3 -m pytest -q -n ${TESTS_N:-8} -m gpu tests -p no:cacheprovider --durations=12 > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -8
timeout ${BENCH_S:-330} python3 -m gemmtune.cli bench --suite benchmarks/suites/edge-s18.csv \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-270} )) --skip-tunableop --skip-inductor --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -v Warning $OUT/bench.log | tail -5
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A30 "^## Per shape: speedup" $OUT/bench/*.md | head -40
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
