#!/usr/bin/env bash
# Session 26, call 4: skinny's GEMV strips (skinny_spec._DEFAULT_GEMV) and --fast's GEMV picks
# (topk.gemv_pick_applies). Every GPU-marked test; memcheck on skinny (the GEMV strips among its
# cases); gemmtune bench on decode layers of 0.5-3B models with a K-contiguous B
# (benchmarks/results/2026-11-27-h100-s26/small_decode.csv). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 90 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py skinny > $OUT/memcheck.txt 2>&1
echo "memcheck rc=$?"; tail -4 $OUT/memcheck.txt
timeout 240 python3 -m gemmtune.cli bench --suite benchmarks/results/2026-11-27-h100-s26/small_decode.csv \
  --skip-inductor --skip-tunableop --deadline $(( $(date +%s) + 200 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out" $OUT/bench.log | head
grep -A6 "Geomean % of the physical" $OUT/bench/*.md; grep -A6 "^## Geomean speedup" $OUT/bench/*.md
grep -A4 "Tuning wall" $OUT/bench/*.md
grep -E "^\| decode \|" $OUT/bench/*.md | head -16
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
