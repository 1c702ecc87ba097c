#!/usr/bin/env bash
# Device call 9 of session 4 (2026-11-24): #16's triton_static on the GPU. Its tests (real
# compiles), compute-sanitizer memcheck of static launches on unaligned operands, then the odd
# group and five odd shapes outside the public suite (benchmarks/suites/odd-unseen.csv), default
# and --fast against cuBLAS (and Inductor on the unseen five), with the family in the space.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
timeout 120 python3 -m pytest -q tests/test_static.py -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests rc=$?"; grep -E "passed|failed|Error|FAIL" $OUT/tests.log | tail -5
timeout 90 compute-sanitizer --tool memcheck python3 scripts/sanitize_fp8_bmm.py static > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -E "sanitize:|ERROR SUMMARY|WRONG|static" $OUT/sanitize.log | tail -8
for s in public:odd benchmarks/suites/odd-unseen.csv:odd2; do
  suite=${s%%:*}; grp=${s##*:}; extra=(--skip-inductor); [ "$suite" != public ] && extra=(--suite $suite)
  timeout 170 python3 -m gemmtune.cli bench "${extra[@]}" --groups $grp --skip-tunableop \
    --out $OUT/bench-$grp > $OUT/bench-$grp.log 2>&1
  echo "bench $grp rc=$?"; grep -E "^odd2? |candidates in" $OUT/bench-$grp.log | sed 's/  */ /g' | cut -c1-230
  rm -f $OUT/bench-$grp/*.png
done
