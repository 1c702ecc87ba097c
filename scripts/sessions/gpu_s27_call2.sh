#!/usr/bin/env bash
# Session 27, call 2: the audit's fixes (differentiable direct calls, workspace borrowing under
# capture, padded weights per stream, atomic file writes). Every GPU-marked test, memcheck on the
# workspace tests, then a third random suite (scripts/random_suite.py --seed 28) through
# gemmtune bench: the timer's captures now share one side stream. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 100 compute-sanitizer --tool memcheck python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py \
  -k "workspace_grew or concurrent_streams or any_order" > $OUT/memcheck.txt 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.txt | tail -4
python3 scripts/random_suite.py --seed ${SEED:-28} --out $OUT/rand.csv
timeout 230 python3 -m gemmtune.cli bench --suite $OUT/rand.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 215 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out" $OUT/bench.log | head
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -A5 "Tuning wall" $OUT/bench/*.md
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
