#!/usr/bin/env bash
# Session 18, call 5: split-K past 128 slices on one or two output tiles. The split-K GPU tests,
# compute-sanitizer memcheck over the split-K cases (two with 300 and 1000 slices), then the
# default tune of splitk, skinny and aten on benchmarks/suites/hugek-s18.csv: every candidate of a
# shape timed in one process, so each shape's best split <= 128 and best split > 128 compare side by
# side (scripts/hugek_compare.py reads the store). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 120 python3 -m pytest -q -n 8 -m gpu tests/test_kernels.py tests/test_gpu.py -k "splitk or split" -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -4
timeout 120 compute-sanitizer --tool memcheck --print-limit 20 python3 scripts/sanitize_kernels.py splitk > $OUT/sanitize.log 2>&1
echo "memcheck rc=$?"; grep -E "SK[0-9]{3}|ERROR SUMMARY|sanitize:" $OUT/sanitize.log | tail -8
timeout ${TUNE_S:-240} python3 -m gemmtune.cli tune --suite benchmarks/suites/hugek-s18.csv --families splitk,skinny,aten \
  --timeout 60 --store $OUT/hugek.sqlite --out $OUT/hugek-table.json --summary $OUT/hugek-summary.json > $OUT/tune.log 2>&1
echo "tune rc=$?"; grep -v Warning $OUT/tune.log | grep -v "elapsed" | tail -16 | cut -c1-200
python3 scripts/hugek_compare.py $OUT/hugek.sqlite | tee $OUT/compare.txt
gzip -f $OUT/hugek.sqlite
