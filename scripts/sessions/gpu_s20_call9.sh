#!/usr/bin/env bash
# Session 20, call 9: the pad pair for bmm on the GPU (memcheck with the batched pair, the pad and
# bmm tests on CUDA), then the decode and splitk groups with the 1% run-off tie (gemmtune bench,
# Inductor skipped). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 120 compute-sanitizer --tool memcheck --print-limit 20 python3 scripts/sanitize_kernels.py pad > $OUT/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|WRONG|batches" $OUT/memcheck.log | head -4
timeout 150 python3 -m pytest -q -n 8 tests/test_pad.py tests/test_padcache.py tests/test_bmm.py -p no:cacheprovider > $OUT/tests.txt 2>&1
echo "tests rc=$?"; tail -2 $OUT/tests.txt
timeout 260 python3 -m gemmtune.cli bench --groups decode,splitk --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 230 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -A8 "Tuning wall" $OUT/bench/*.md | head -8; grep -A6 "^## Geomean speedup" $OUT/bench/*.md | tail -3
grep -A18 "^## Per shape: speedup" $OUT/bench/*.md | sed -n 3,18p
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
tar czf $OUT/logs.tgz -C $OUT memcheck.log tests.txt bench.log && rm -f $OUT/memcheck.log $OUT/tests.txt
